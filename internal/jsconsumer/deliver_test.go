package jsconsumer_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluiceflow/sluice/internal/jsconsumer"
)

func TestDeliverPolicyNames(t *testing.T) {
	t.Parallel()
	names := []string{"all", "last", "new", "last_per_subject", "by_start_sequence", "by_start_time"}
	const want = "all, last, new, last_per_subject, by_start_sequence or by_start_time"
	if got := jsconsumer.DeliverPolicy(0).String(); got != "all" {
		t.Errorf("zero value String() = %q, want all", got)
	}
	for i, name := range names {
		var p jsconsumer.DeliverPolicy
		if err := p.UnmarshalText([]byte(name)); err != nil || p != jsconsumer.DeliverPolicy(i) || p.String() != name {
			t.Errorf("UnmarshalText(%q) = %v, %v", name, p, err)
		}
	}
	for _, bad := range []string{"", "first", "ALL"} {
		var p jsconsumer.DeliverPolicy
		err := p.UnmarshalText([]byte(bad))
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q (want %s)", bad, want)) {
			t.Errorf("UnmarshalText(%q) = %v, want an error naming it and listing %s", bad, err, want)
		}
	}
	if got := jsconsumer.DeliverPolicy(7).String(); got != "DeliverPolicy(7)" {
		t.Errorf("DeliverPolicy(7).String() = %q", got)
	}
}

func TestParseDeliverFrom(t *testing.T) {
	t.Parallel()
	ms := time.UnixMilli(1753428483000).UTC()
	for _, tt := range []struct {
		in   string
		want jsconsumer.DeliverFrom
	}{
		{"", jsconsumer.DeliverFrom{Policy: jsconsumer.DeliverAll}},
		{"AlL", jsconsumer.DeliverFrom{Policy: jsconsumer.DeliverAll}},
		{"lAsT", jsconsumer.DeliverFrom{Policy: jsconsumer.DeliverLast}},
		{"NEW", jsconsumer.DeliverFrom{Policy: jsconsumer.DeliverNew}},
		{"last_PER_suBJEct", jsconsumer.DeliverFrom{Policy: jsconsumer.DeliverLastPerSubject}},
		{" by_start_sequence   768 ", jsconsumer.DeliverFrom{Policy: jsconsumer.DeliverByStartSequence, StartSeq: 768}},
		{"by_start_time 1753428483000", jsconsumer.DeliverFrom{Policy: jsconsumer.DeliverByStartTime, StartTime: ms}},
		{"by_start_time 2025-07-25T07:28:03Z", jsconsumer.DeliverFrom{Policy: jsconsumer.DeliverByStartTime, StartTime: ms}},
	} {
		t.Run(tt.in, func(t *testing.T) {
			got, err := jsconsumer.ParseDeliverFrom(tt.in)
			if err != nil || got.Policy != tt.want.Policy || got.StartSeq != tt.want.StartSeq || !got.StartTime.Equal(tt.want.StartTime) {
				t.Fatalf("ParseDeliverFrom(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
			// Its text parses back to it.
			var back jsconsumer.DeliverFrom
			if err := back.UnmarshalText([]byte(got.String())); err != nil || back.String() != got.String() {
				t.Fatalf("%q: UnmarshalText(%q) = %+v, %v", tt.in, got.String(), back, err)
			}
		})
	}
	for _, tt := range []struct{ in, says string }{
		{"first", `unknown deliver policy "first" (want all, last, new, last_per_subject, by_start_sequence or by_start_time)`},
		{"all now", `all takes nothing after it, got "now"`},
		{"by_start_sequence", "by_start_sequence takes a stream sequence from 1"},
		{"by_start_sequence 7invalid8", `by_start_sequence takes a stream sequence from 1, not "7invalid8"`},
		{"by_start_sequence 0", `by_start_sequence takes a stream sequence from 1, not "0"`},
		{"by_start_time 175invalid3428483000", `by_start_time takes a time in unix epoch milliseconds or RFC 3339, not "175invalid3428483000"`},
		{"by_start_time yesterday", `not "yesterday"`},
	} {
		t.Run(tt.in, func(t *testing.T) {
			var d jsconsumer.DeliverFrom
			if err := d.UnmarshalText([]byte(tt.in)); err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("UnmarshalText(%q) = %v, want an error saying %s", tt.in, err, tt.says)
			}
		})
	}
}

func TestDeliverFromApply(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 7, 25, 7, 28, 3, 0, time.UTC)
	for _, tt := range []struct {
		d      jsconsumer.DeliverFrom
		policy jetstream.DeliverPolicy
		seq    uint64
	}{
		{jsconsumer.DeliverFrom{}, jetstream.DeliverAllPolicy, 0},
		{jsconsumer.DeliverFrom{Policy: jsconsumer.DeliverLast}, jetstream.DeliverLastPolicy, 0},
		{jsconsumer.DeliverFrom{Policy: jsconsumer.DeliverNew}, jetstream.DeliverNewPolicy, 0},
		{jsconsumer.DeliverFrom{Policy: jsconsumer.DeliverLastPerSubject}, jetstream.DeliverLastPerSubjectPolicy, 0},
		{jsconsumer.DeliverFrom{Policy: jsconsumer.DeliverByStartSequence, StartSeq: 9}, jetstream.DeliverByStartSequencePolicy, 9},
		{jsconsumer.DeliverFrom{Policy: jsconsumer.DeliverByStartTime, StartTime: at}, jetstream.DeliverByStartTimePolicy, 0},
	} {
		t.Run(tt.d.String(), func(t *testing.T) {
			if err := tt.d.Validate(); err != nil {
				t.Fatal(err)
			}
			var cc jetstream.ConsumerConfig
			tt.d.Apply(&cc)
			if cc.DeliverPolicy != tt.policy || cc.OptStartSeq != tt.seq ||
				(tt.d.Policy == jsconsumer.DeliverByStartTime) != (cc.OptStartTime != nil && cc.OptStartTime.Equal(at)) {
				t.Fatalf("Apply: %v, seq %d, time %v", cc.DeliverPolicy, cc.OptStartSeq, cc.OptStartTime)
			}
		})
	}
	for _, bad := range []jsconsumer.DeliverFrom{
		{Policy: jsconsumer.DeliverByStartSequence},
		{Policy: jsconsumer.DeliverByStartTime},
		{Policy: 7},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil", bad)
		}
	}
}
