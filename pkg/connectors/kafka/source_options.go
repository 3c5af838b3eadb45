package kafka

import (
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Defaults of the source, Numaflow's where it sets one.
const (
	defaultSessionTimeout    = 45 * time.Second
	defaultHeartbeatInterval = 15 * time.Second
	defaultFetchMaxWait      = 500 * time.Millisecond
)

// consumerOptions returns the consumer group options of s: manual commits,
// rebalances only between polls, and the properties mapped.
func (s *Source) consumerOptions() []kgo.Opt {
	p := s.cfg.Client.Properties
	opts := []kgo.Opt{
		kgo.ConsumerGroup(s.cfg.Group),
		kgo.ConsumeTopics(s.cfg.Topics...),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(s.onAssigned),
		kgo.OnPartitionsRevoked(s.onRevoked),
		kgo.OnPartitionsLost(s.onLost),
		kgo.FetchMaxWait(p.millisOf("fetch.wait.max.ms", defaultFetchMaxWait)),
		kgo.Balancers(balancers(p)...),
	}
	s.reset = "earliest"
	start := kgo.NewOffset().AtStart()
	if v, _ := p.get("auto.offset.reset"); strings.EqualFold(v, "latest") || strings.EqualFold(v, "largest") || strings.EqualFold(v, "end") {
		s.reset = "latest"
		start = kgo.NewOffset().AtEnd()
	}
	opts = append(opts, kgo.ConsumeStartOffset(start), kgo.ConsumeResetOffset(start))
	session := p.millisOf("session.timeout.ms", defaultSessionTimeout)
	opts = append(opts, kgo.SessionTimeout(session),
		kgo.HeartbeatInterval(p.millisOf("heartbeat.interval.ms", min(defaultHeartbeatInterval, session/3))))
	if _, ok := p.get("max.poll.interval.ms"); ok {
		opts = append(opts, kgo.RebalanceTimeout(p.millisOf("max.poll.interval.ms", 0)))
	}
	if id, ok := p.get("group.instance.id"); ok {
		opts = append(opts, kgo.InstanceID(id))
	}
	if _, ok := p.get("request.timeout.ms"); ok {
		opts = append(opts, kgo.RequestTimeoutOverhead(p.millisOf("request.timeout.ms", 0)))
	}
	if _, ok := p.get("fetch.max.bytes"); ok {
		opts = append(opts, kgo.FetchMaxBytes(int32(p.int("fetch.max.bytes", 0))))
	}
	if _, ok := p.get("max.partition.fetch.bytes"); ok {
		opts = append(opts, kgo.FetchMaxPartitionBytes(int32(p.int("max.partition.fetch.bytes", 0))))
	}
	if _, ok := p.get("fetch.min.bytes"); ok {
		opts = append(opts, kgo.FetchMinBytes(int32(p.int("fetch.min.bytes", 0))))
	}
	s.every = p.millisOf("auto.commit.interval.ms", 0)
	return opts
}

// balancers maps partition.assignment.strategy, cooperative-sticky by
// default.
func balancers(p Properties) []kgo.GroupBalancer {
	v, ok := p.get("partition.assignment.strategy")
	if !ok {
		return []kgo.GroupBalancer{kgo.CooperativeStickyBalancer()}
	}
	var out []kgo.GroupBalancer
	for name := range strings.SplitSeq(v, ",") {
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "range":
			out = append(out, kgo.RangeBalancer())
		case "roundrobin":
			out = append(out, kgo.RoundRobinBalancer())
		case "cooperative-sticky":
			out = append(out, kgo.CooperativeStickyBalancer())
		}
	}
	return out
}
