package jsconsumer

import (
	"testing"

	"github.com/nats-io/nats.go"
)

// streamSeq reads the stream sequence where nats.go's Msg.Metadata does, in
// ack reply subjects of both forms, and gives 0 for other subjects.
func TestStreamSeq(t *testing.T) {
	tests := []struct {
		name, reply string
		want        uint64
	}{
		{"nine tokens", "$JS.ACK.S.C.1.42.7.1700000000000000000.3", 42},
		{"twelve tokens", "$JS.ACK.dom.HASH.S.C.2.9876543210.8.1700000000000000000.0.tok", 9876543210},
		{"twelve tokens, no domain", "$JS.ACK._.HASH.S.C.1.5.5.1700000000000000000.0.tok", 5},
		{"eleven tokens", "$JS.ACK.dom.HASH.S.C.1.6.6.1700000000000000000.0", 6},
		{"thirteen tokens", "$JS.ACK.dom.HASH.S.C.1.7.7.1700000000000000000.0.tok.more", 7},
		{"ten tokens", "$JS.ACK.x.S.C.1.42.7.1700000000000000000.3", 0},
		{"eight tokens", "$JS.ACK.S.C.1.42.7.1700000000000000000", 0},
		{"not an ack subject", "_INBOX.abc.1.42.7.1700000000000000000.3.x.y", 0},
		{"not a number", "$JS.ACK.S.C.1.4x.7.1700000000000000000.3", 0},
		{"empty sequence", "$JS.ACK.S.C.1..7.1700000000000000000.3", 0},
		{"empty", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := streamSeq(tt.reply); got != tt.want {
				t.Errorf("streamSeq(%q) = %d, want %d", tt.reply, got, tt.want)
			}
			meta, err := (&nats.Msg{Reply: tt.reply, Sub: &nats.Subscription{}}).Metadata()
			var fromMeta uint64
			if err == nil {
				fromMeta = meta.Sequence.Stream
			}
			if fromMeta != tt.want {
				t.Errorf("Msg.Metadata reads %d (%v), this test wants %d", fromMeta, err, tt.want)
			}
			var delivered uint64
			if err == nil {
				delivered = meta.NumDelivered
			}
			if got := deliveries(tt.reply); got != delivered {
				t.Errorf("deliveries(%q) = %d, Msg.Metadata reads %d", tt.reply, got, delivered)
			}
		})
	}
}

func BenchmarkStreamSeq(b *testing.B) {
	const reply = "$JS.ACK.sluice-pipeline-vertex-0.sluice-pipeline-vertex-0.1.123456.123456.1700000000000000000.4999"
	b.ReportAllocs()
	var sum uint64
	for b.Loop() {
		sum += streamSeq(reply)
	}
	if sum == 0 {
		b.Fatal("no sequence")
	}
}
