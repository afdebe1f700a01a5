// A kafkajs 2.2.4 consumer-group member with its default assigner (RoundRobinAssigner), a real JavaScript peer for
// the mixed-group e2e tests (installed into .npm/ by scripts/setup.sh). One JSON object a line on stdout:
// {"event":"assigned","partitions":[..],"protocol":NAME,"leader":BOOL} after each SyncGroup (kafkajs's GROUP_JOIN),
// {"event":"revoked"} when it stops fetching to rejoin (REBALANCING, emitted once its fetchers have stopped),
// {"event":"record","partition":P,"offset":O} per record, {"event":"error"|"crash",...}, and {"event":"closed"}
// after its LeaveGroup on SIGTERM or SIGINT.
// Usage: node kafkajs_member.js BOOTSTRAP GROUP TOPIC CLIENT_ID [SESSION_MS=6000] [HEARTBEAT_MS=200] [COMMIT_MS=200]
const { Kafka, logLevel } = require('kafkajs');

const [bootstrap, groupId, topic, clientId, sessionMs = '6000', heartbeatMs = '200', commitMs = '200'] =
  process.argv.slice(2);
if (!bootstrap || !groupId || !topic || !clientId) {
  console.error('usage: kafkajs_member.js BOOTSTRAP GROUP TOPIC CLIENT_ID [SESSION_MS] [HEARTBEAT_MS] [COMMIT_MS]');
  process.exit(2);
}
// Writes to a pipe are synchronous on Linux: a line is out before the next event is handled.
const emit = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
const logCreator = () => ({ level, log }) => emit({ event: 'error', level, message: log.message, error: log.error });

const kafka = new Kafka({ clientId, brokers: bootstrap.split(','), logLevel: logLevel.ERROR, logCreator });
const consumer = kafka.consumer({
  groupId,
  sessionTimeout: Number(sessionMs),
  heartbeatInterval: Number(heartbeatMs),
  rebalanceTimeout: 20000,
  maxWaitTimeInMs: 100,
  retry: { retries: 30, initialRetryTime: 100, maxRetryTime: 1000 },
});
const { GROUP_JOIN, REBALANCING, CRASH } = consumer.events;
consumer.on(GROUP_JOIN, ({ payload }) => {
  const partitions = [...(payload.memberAssignment[topic] || [])].sort((a, b) => a - b);
  emit({ event: 'assigned', partitions, protocol: payload.groupProtocol, leader: payload.isLeader });
});
consumer.on(REBALANCING, () => emit({ event: 'revoked' }));
consumer.on(CRASH, ({ payload }) => emit({ event: 'crash', error: String(payload.error) }));

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  try {
    await consumer.disconnect(); // stops fetching, commits, sends LeaveGroup
  } finally {
    emit({ event: 'closed' });
    process.exit(0);
  }
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);

(async () => {
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  await consumer.run({
    autoCommitInterval: Number(commitMs),
    eachMessage: async ({ partition, message }) => {
      emit({ event: 'record', partition, offset: Number(message.offset) });
    },
  });
})().catch((e) => {
  emit({ event: 'crash', error: String((e && e.stack) || e) });
  process.exit(1);
});
