package source

import "github.com/sluiceflow/sluice/internal/jsconsumer"

// DeliverFrom is where a consumer a [JetStream] source creates starts
// ([JetStreamConfig.DeliverPolicy]): a deliver_policy as Numaflow writes it.
// Its fields are Policy, a [DeliverPolicy]; StartSeq, the first stream
// sequence of [DeliverByStartSequence], from 1; and StartTime, the time of
// [DeliverByStartTime]. Its text (String, MarshalText, UnmarshalText) is the
// policy's name, then the sequence or the time: "by_start_sequence 768",
// "by_start_time 1753428483000"; Validate reports a policy without a name,
// and a by_start_sequence or by_start_time without its start. The zero value
// is [DeliverAll].
type DeliverFrom = jsconsumer.DeliverFrom

// DeliverPolicy is the policy of a [DeliverFrom]: where in its stream a
// consumer starts delivering when it is created. Its text is its name as
// Numaflow writes it (all, last, new, last_per_subject, by_start_sequence,
// by_start_time); UnmarshalText rejects any other with an error listing the
// names. The zero value is [DeliverAll].
type DeliverPolicy = jsconsumer.DeliverPolicy

// The deliver policies.
const (
	// DeliverAll starts at the first message the stream holds.
	DeliverAll = jsconsumer.DeliverAll
	// DeliverLast starts at the last message the stream holds.
	DeliverLast = jsconsumer.DeliverLast
	// DeliverNew starts with the messages stored after the consumer is
	// created.
	DeliverNew = jsconsumer.DeliverNew
	// DeliverLastPerSubject starts at the last message of each subject.
	DeliverLastPerSubject = jsconsumer.DeliverLastPerSubject
	// DeliverByStartSequence starts at a stream sequence
	// (DeliverFrom.StartSeq).
	DeliverByStartSequence = jsconsumer.DeliverByStartSequence
	// DeliverByStartTime starts at the first message stored at or after a
	// time (DeliverFrom.StartTime).
	DeliverByStartTime = jsconsumer.DeliverByStartTime
)

// ParseDeliverFrom parses a deliver_policy as Numaflow does: "all" (also
// ""), "last", "new", "last_per_subject", "by_start_sequence <n>" and
// "by_start_time <unix epoch milliseconds>", the name in any case and with
// any spaces around the words. by_start_time also takes an RFC 3339 time.
func ParseDeliverFrom(s string) (DeliverFrom, error) { return jsconsumer.ParseDeliverFrom(s) }
