package source

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/internal/jsconsumer"
)

// OwnConsumerName is the name of the durable consumer a JetStream source
// creates when it is given none, as Numaflow names it:
// numaflow-<durableName>-<stream>, where durableName is <pipeline>-<vertex>.
func OwnConsumerName(durableName, stream string) string {
	return "numaflow-" + durableName + "-" + stream
}

// consumerName returns the name of the consumer cfg reads through.
func (cfg JetStreamConfig) consumerName() (string, error) {
	if cfg.Consumer != "" {
		return cfg.Consumer, nil
	}
	if strings.TrimSpace(cfg.DurableName) == "" {
		return "", fmt.Errorf("%w: consumer and durableName are both empty: one is needed", ErrNATSConfig)
	}
	return OwnConsumerName(cfg.DurableName, cfg.Stream), nil
}

// consumerConfig is the configuration of a consumer the source creates.
func (cfg JetStreamConfig) consumerConfig(name string) jetstream.ConsumerConfig {
	cc := jetstream.ConsumerConfig{
		Durable:     name,
		Description: "sluice JetStream source",
		AckPolicy:   jetstream.AckExplicitPolicy,
		AckWait:     cfg.AckWait,
	}
	cfg.DeliverPolicy.Apply(&cc)
	switch len(cfg.FilterSubjects) {
	case 0:
	case 1:
		cc.FilterSubject = cfg.FilterSubjects[0]
	default:
		cc.FilterSubjects = slices.Clone(cfg.FilterSubjects)
	}
	return cc
}

// bindConsumer looks the consumer up and creates it when it does not exist
// (like Numaflow, also when it is named by cfg.Consumer), and returns its ack
// wait. The source's own consumer, when it exists, is updated to cfg's ack
// wait and filter subjects; a consumer named by cfg.Consumer is used as it
// is.
func (j *JetStream) bindConsumer(ctx context.Context) (time.Duration, error) {
	cfg := j.cfg
	if len(cfg.FilterSubjects) > 1 && !serverAtLeast(j.nc, 2, 10) {
		return 0, fmt.Errorf("%w: filterSubjects: more than one needs nats-server 2.10 or later; the server runs %s",
			ErrNATSConfig, j.nc.ConnectedServerVersion())
	}
	cons, err := j.js.Consumer(ctx, cfg.Stream, j.name)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		j.log.Info("creating the consumer", zap.Stringer("deliverPolicy", cfg.DeliverPolicy))
		cons, err = j.js.CreateConsumer(ctx, cfg.Stream, cfg.consumerConfig(j.name))
	case err == nil && cfg.Consumer == "":
		cons, err = j.updateOwn(ctx, cons)
	}
	if err != nil {
		return 0, j.consumerErr(err)
	}
	info := cons.CachedInfo()
	if info.Config.DeliverSubject != "" {
		return 0, fmt.Errorf("%w: consumer %q of stream %q is a push consumer; the source needs a pull consumer",
			ErrNATSConfig, j.name, cfg.Stream)
	}
	if p := info.Config.AckPolicy; p != jetstream.AckExplicitPolicy {
		j.log.Warn("the consumer's ack policy is not explicit: messages may be lost (at most once)",
			zap.String("ackPolicy", p.String()))
	}
	j.cons = cons
	return info.Config.AckWait, nil
}

// updateOwn updates the source's own consumer to cfg's ack wait and filter
// subjects when they changed. Its deliver policy cannot change: it applied
// when the consumer was created.
func (j *JetStream) updateOwn(ctx context.Context, cons jetstream.Consumer) (jetstream.Consumer, error) {
	have := cons.CachedInfo().Config
	want := j.cfg.consumerConfig(j.name)
	if have.DeliverPolicy != want.DeliverPolicy || have.OptStartSeq != want.OptStartSeq {
		j.log.Info("the consumer exists: it keeps its position, and the deliver policy applies only to a new consumer",
			zap.Stringer("deliverPolicy", j.cfg.DeliverPolicy), zap.String("consumerDeliverPolicy", have.DeliverPolicy.String()))
	}
	if have.AckWait == want.AckWait && have.FilterSubject == want.FilterSubject &&
		slices.Equal(have.FilterSubjects, want.FilterSubjects) {
		return cons, nil
	}
	upd := have
	upd.AckWait, upd.FilterSubject, upd.FilterSubjects = want.AckWait, want.FilterSubject, want.FilterSubjects
	return j.js.UpdateConsumer(ctx, j.cfg.Stream, upd)
}

// consumerErr describes a failure to look up or create the consumer.
func (j *JetStream) consumerErr(err error) error {
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("jetstream source: stream %q not found: %w", j.cfg.Stream, err)
	}
	return fmt.Errorf("jetstream source: consumer %q of stream %q: %w", j.name, j.cfg.Stream, jsconsumer.ConnErr(err))
}

// serverAtLeast reports whether the connected server's version is at least
// major.minor.
func serverAtLeast(nc *nats.Conn, major, minor int) bool {
	v := strings.TrimPrefix(nc.ConnectedServerVersion(), "v")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}
