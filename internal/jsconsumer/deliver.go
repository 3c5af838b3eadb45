package jsconsumer

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluiceflow/sluice/internal/enum"
)

// DeliverPolicy is where in its stream a consumer starts delivering when it
// is created. The zero value is [DeliverAll].
type DeliverPolicy uint8

const (
	// DeliverAll starts at the first message the stream holds.
	DeliverAll DeliverPolicy = iota
	// DeliverLast starts at the last message the stream holds.
	DeliverLast
	// DeliverNew starts with the messages stored after the consumer is
	// created.
	DeliverNew
	// DeliverLastPerSubject starts at the last message of each subject.
	DeliverLastPerSubject
	// DeliverByStartSequence starts at a stream sequence
	// ([DeliverFrom.StartSeq]).
	DeliverByStartSequence
	// DeliverByStartTime starts at the first message stored at or after a
	// time ([DeliverFrom.StartTime]).
	DeliverByStartTime
)

var deliverPolicyNames = [...]string{
	DeliverAll:             "all",
	DeliverLast:            "last",
	DeliverNew:             "new",
	DeliverLastPerSubject:  "last_per_subject",
	DeliverByStartSequence: "by_start_sequence",
	DeliverByStartTime:     "by_start_time",
}

// String returns the policy's name as Numaflow writes it: all, last, new,
// last_per_subject, by_start_sequence or by_start_time.
func (p DeliverPolicy) String() string {
	return enum.Name(deliverPolicyNames[:], p, "DeliverPolicy")
}

// MarshalText returns the policy's name.
func (p DeliverPolicy) MarshalText() ([]byte, error) {
	return enum.Marshal(deliverPolicyNames[:], p, "deliver policy")
}

// UnmarshalText parses a policy's name, and rejects any other text with an
// error listing the names.
func (p *DeliverPolicy) UnmarshalText(b []byte) error {
	return enum.Parse(p, deliverPolicyNames[:], b, "deliver policy")
}

// jetstream returns p as nats.go has it.
func (p DeliverPolicy) jetstream() jetstream.DeliverPolicy {
	switch p {
	case DeliverLast:
		return jetstream.DeliverLastPolicy
	case DeliverNew:
		return jetstream.DeliverNewPolicy
	case DeliverLastPerSubject:
		return jetstream.DeliverLastPerSubjectPolicy
	case DeliverByStartSequence:
		return jetstream.DeliverByStartSequencePolicy
	case DeliverByStartTime:
		return jetstream.DeliverByStartTimePolicy
	}
	return jetstream.DeliverAllPolicy
}

// DeliverFrom is a deliver_policy as Numaflow writes it: a [DeliverPolicy]
// and, for by_start_sequence and by_start_time, where to start. Its text is
// the policy's name, then the sequence or the time: "by_start_sequence 768",
// "by_start_time 1753428483000". The zero value is [DeliverAll].
type DeliverFrom struct {
	Policy DeliverPolicy
	// StartSeq is the first stream sequence of DeliverByStartSequence,
	// from 1.
	StartSeq uint64
	// StartTime is the time of DeliverByStartTime.
	StartTime time.Time
}

// ParseDeliverFrom parses a deliver_policy as Numaflow does: "all" (also
// ""), "last", "new", "last_per_subject", "by_start_sequence <n>" and
// "by_start_time <unix epoch milliseconds>", the name in any case and with
// any spaces around the words. by_start_time also takes an RFC 3339 time.
func ParseDeliverFrom(s string) (DeliverFrom, error) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return DeliverFrom{}, nil
	}
	var d DeliverFrom
	if err := d.Policy.UnmarshalText(bytes.ToLower([]byte(f[0]))); err != nil {
		return DeliverFrom{}, err
	}
	takes := d.Policy == DeliverByStartSequence || d.Policy == DeliverByStartTime
	switch {
	case !takes && len(f) > 1:
		return DeliverFrom{}, fmt.Errorf("%s takes nothing after it, got %q", d.Policy, strings.Join(f[1:], " "))
	case takes && len(f) != 2:
		return DeliverFrom{}, fmt.Errorf("%s takes %s", d.Policy, d.argument())
	case d.Policy == DeliverByStartSequence:
		seq, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil || seq == 0 {
			return DeliverFrom{}, fmt.Errorf("%s takes %s, not %q", d.Policy, d.argument(), f[1])
		}
		d.StartSeq = seq
	case d.Policy == DeliverByStartTime:
		if ms, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			d.StartTime = time.UnixMilli(ms).UTC()
			break
		}
		t, err := time.Parse(time.RFC3339Nano, f[1])
		if err != nil {
			return DeliverFrom{}, fmt.Errorf("%s takes %s, not %q", d.Policy, d.argument(), f[1])
		}
		d.StartTime = t
	}
	return d, nil
}

// argument says what d's policy takes after its name.
func (d DeliverFrom) argument() string {
	if d.Policy == DeliverByStartSequence {
		return "a stream sequence from 1"
	}
	return "a time in unix epoch milliseconds or RFC 3339"
}

// String returns d as Numaflow writes it; a start time is in epoch
// milliseconds when it has no finer part, else in RFC 3339.
func (d DeliverFrom) String() string {
	switch d.Policy {
	case DeliverByStartSequence:
		return d.Policy.String() + " " + strconv.FormatUint(d.StartSeq, 10)
	case DeliverByStartTime:
		if d.StartTime.Equal(time.UnixMilli(d.StartTime.UnixMilli())) {
			return d.Policy.String() + " " + strconv.FormatInt(d.StartTime.UnixMilli(), 10)
		}
		return d.Policy.String() + " " + d.StartTime.Format(time.RFC3339Nano)
	}
	return d.Policy.String()
}

// MarshalText returns d's text.
func (d DeliverFrom) MarshalText() ([]byte, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return []byte(d.String()), nil
}

// UnmarshalText parses b as [ParseDeliverFrom] does.
func (d *DeliverFrom) UnmarshalText(b []byte) error {
	v, err := ParseDeliverFrom(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// Validate reports a policy without a name, a by_start_sequence without a
// sequence and a by_start_time without a time.
func (d DeliverFrom) Validate() error {
	switch {
	case int(d.Policy) >= len(deliverPolicyNames):
		return fmt.Errorf("unknown deliver policy %d", uint8(d.Policy))
	case d.Policy == DeliverByStartSequence && d.StartSeq == 0:
		return fmt.Errorf("%s takes %s", d.Policy, d.argument())
	case d.Policy == DeliverByStartTime && d.StartTime.IsZero():
		return fmt.Errorf("%s takes %s", d.Policy, d.argument())
	}
	return nil
}

// Apply sets d in cfg, the configuration of a consumer to create.
func (d DeliverFrom) Apply(cfg *jetstream.ConsumerConfig) {
	cfg.DeliverPolicy = d.Policy.jetstream()
	cfg.OptStartSeq, cfg.OptStartTime = 0, nil
	switch d.Policy {
	case DeliverByStartSequence:
		cfg.OptStartSeq = d.StartSeq
	case DeliverByStartTime:
		t := d.StartTime
		cfg.OptStartTime = &t
	}
}
