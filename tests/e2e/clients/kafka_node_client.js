// kafka-node 2.x (a 0.8/0.10-era client) as producer or consumer of partition 0, for tests/e2e/test_old_clients.py.
// produce HOST:PORT TOPIC TAG: two keyed messages per codec (none, gzip, snappy), one send per codec, in order.
// consume HOST:PORT TOPIC COUNT: prints [offset, key, value] (base64) as JSON once COUNT messages arrived.
// commit HOST:PORT TOPIC GROUP OFFSET / fetchcommit HOST:PORT TOPIC GROUP: partition 0's offset through
// kafka-node's Offset API, which speaks OffsetCommit v0 / OffsetFetch v0 (as its HighLevelConsumer does).
const kafka = require('kafka-node');
const [mode, host, topic, arg, extra] = process.argv.slice(2);
const client = new kafka.KafkaClient({kafkaHost: host, connectTimeout: 10000, requestTimeout: 15000});
const fail = (e) => { console.error('ERROR', e && (e.stack || e)); process.exit(1); };
client.on('error', fail);
if (mode === 'produce') {
  const producer = new kafka.Producer(client, {requireAcks: 1, partitionerType: 0});
  producer.on('error', fail);
  producer.on('ready', () => {
    const results = [];
    const sendCodec = (codec) => {
      if (codec > 2) {
        console.log(JSON.stringify(results));
        client.close(() => process.exit(0));
        return;
      }
      const messages = [0, 1].map((i) => new kafka.KeyedMessage(`${arg}-c${codec}-k${i}`, `${arg}-c${codec}-v${i}`));
      producer.send([{topic, partition: 0, attributes: codec, messages}], (err, res) => {
        if (err) fail(err);
        results.push(res);
        sendCodec(codec + 1);
      });
    };
    sendCodec(0);
  });
} else if (mode === 'commit' || mode === 'fetchcommit') {
  client.on('ready', () => {
    const offset = new kafka.Offset(client);
    const done = (err, res) => {
      if (err) fail(err);
      console.log(JSON.stringify(res));
      process.exit(0);
    };
    if (mode === 'commit') {
      offset.commit(arg, [{topic, partition: 0, offset: parseInt(extra, 10), metadata: 'kafka-node'}], done);
    } else {
      offset.fetchCommits(arg, [{topic, partition: 0}], done);
    }
  });
} else {
  const want = parseInt(arg, 10);
  const seen = [];
  const consumer = new kafka.Consumer(client, [{topic, partition: 0, offset: 0}],
    {autoCommit: false, fromOffset: true, encoding: 'buffer', keyEncoding: 'buffer', fetchMaxWaitMs: 200});
  consumer.on('error', fail);
  consumer.on('offsetOutOfRange', fail);
  // Exit 2 with what arrived if COUNT never does, so the test shows what was missing.
  const timer = setTimeout(() => { console.log(JSON.stringify(seen)); process.exit(2); }, 30000);
  consumer.on('message', (m) => {
    seen.push([m.offset, m.key === null ? null : m.key.toString('base64'), m.value === null ? null : m.value.toString('base64')]);
    if (seen.length >= want) {
      clearTimeout(timer);
      console.log(JSON.stringify(seen));
      process.exit(0);
    }
  });
}
