// A sarama 1.22 consumer-group member (Debian golang-github-shopify-sarama-dev), a real Go peer for the mixed-group
// e2e tests: it prints one JSON object a line on stdout, flushed at once: {"event":"assigned","partitions":[..]}
// when a session starts (after SyncGroup), {"event":"revoked"} when it ends (every claim has stopped consuming,
// before the member rejoins), {"event":"record","partition":P,"offset":O} per record, {"event":"error",...} and
// {"event":"closed"} after its LeaveGroup on SIGTERM or SIGINT.
//
// Built at set-up time without network (scripts/setup.sh: GOPATH=/usr/share/gocode, GO111MODULE=off).
//
// Usage: sarama-member -bootstrap HOST:PORT -group G -topic T -client-id ID [-strategy range|roundrobin]
// [-session-ms 6000] [-heartbeat-ms 200] [-commit-ms 200]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/Shopify/sarama"
)

var (
	outMu sync.Mutex
	out   = json.NewEncoder(os.Stdout)
)

func emit(v map[string]interface{}) {
	outMu.Lock()
	defer outMu.Unlock()
	_ = out.Encode(v) // one write(2) per line: the reading test sees whole lines
}

type handler struct{ topic string }

func (h handler) Setup(s sarama.ConsumerGroupSession) error {
	parts := append([]int32(nil), s.Claims()[h.topic]...)
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	emit(map[string]interface{}{"event": "assigned", "partitions": parts, "generation": s.GenerationID()})
	return nil
}

func (h handler) Cleanup(s sarama.ConsumerGroupSession) error {
	emit(map[string]interface{}{"event": "revoked", "generation": s.GenerationID()})
	return nil
}

func (h handler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for msg := range c.Messages() {
		emit(map[string]interface{}{"event": "record", "partition": msg.Partition, "offset": msg.Offset})
		s.MarkMessage(msg, "")
	}
	return nil
}

func main() {
	bootstrap := flag.String("bootstrap", "127.0.0.1:9092", "comma-separated bootstrap addresses")
	group := flag.String("group", "", "consumer group id (required)")
	topic := flag.String("topic", "", "the one subscribed topic (required)")
	clientID := flag.String("client-id", "sarama-member", "client id")
	strategy := flag.String("strategy", "range", "sarama balance strategy: range or roundrobin (1.22 has no sticky)")
	sessionMs := flag.Int("session-ms", 6000, "session timeout (ms)")
	heartbeatMs := flag.Int("heartbeat-ms", 200, "heartbeat interval (ms)")
	commitMs := flag.Int("commit-ms", 200, "offset commit interval (ms)")
	flag.Parse()
	if *group == "" || *topic == "" {
		fmt.Fprintln(os.Stderr, "sarama-member: -group and -topic are required")
		os.Exit(2)
	}
	strategies := map[string]sarama.BalanceStrategy{
		"range": sarama.BalanceStrategyRange, "roundrobin": sarama.BalanceStrategyRoundRobin,
	}
	chosen, ok := strategies[*strategy]
	if !ok {
		fmt.Fprintf(os.Stderr, "sarama-member: unknown strategy %q\n", *strategy)
		os.Exit(2)
	}

	config := sarama.NewConfig()
	config.Version = sarama.V1_0_0_0 // consumer groups need >= 0.10.2
	config.ClientID = *clientID
	config.Consumer.Return.Errors = true
	config.Consumer.Offsets.Initial = sarama.OffsetOldest
	config.Consumer.Offsets.CommitInterval = time.Duration(*commitMs) * time.Millisecond
	config.Consumer.Fetch.Default = 64 << 10
	config.Consumer.MaxWaitTime = 100 * time.Millisecond
	config.Consumer.Group.Session.Timeout = time.Duration(*sessionMs) * time.Millisecond
	config.Consumer.Group.Heartbeat.Interval = time.Duration(*heartbeatMs) * time.Millisecond
	config.Consumer.Group.Rebalance.Strategy = chosen
	config.Consumer.Group.Rebalance.Timeout = 20 * time.Second
	config.Consumer.Group.Rebalance.Retry.Backoff = 200 * time.Millisecond
	config.Metadata.RefreshFrequency = time.Second
	config.Metadata.Retry.Backoff = 100 * time.Millisecond

	cg, err := sarama.NewConsumerGroup(strings.Split(*bootstrap, ","), *group, config)
	if err != nil {
		emit(map[string]interface{}{"event": "error", "error": err.Error()})
		os.Exit(1)
	}
	go func() {
		for err := range cg.Errors() {
			emit(map[string]interface{}{"event": "error", "error": err.Error()})
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-signals
		cancel()
	}()
	for ctx.Err() == nil {
		// Consume returns at each rebalance (after Cleanup); the next call rejoins.
		if err := cg.Consume(ctx, []string{*topic}, handler{*topic}); err != nil && ctx.Err() == nil {
			emit(map[string]interface{}{"event": "error", "error": err.Error()})
			time.Sleep(200 * time.Millisecond) // the retry backoff of a failed join, not a synchronisation
		}
	}
	if err := cg.Close(); err != nil {
		emit(map[string]interface{}{"event": "error", "error": err.Error()})
	}
	emit(map[string]interface{}{"event": "closed"})
}
