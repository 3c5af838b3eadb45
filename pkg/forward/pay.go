package forward

import (
	"github.com/sluiceflow/sluice/pkg/isb"
)

// refund gives back, with Options.ExcludeDropped, the bytes, the extra
// cost and the groups' tokens the dropped messages of batch paid (see
// throttle.Tokens.Refund): those that none of msgs (what goes on to the
// sink) or the messages bypass sends to the other sinks came from, and that
// were not nacked.
func (f *worker) refund(batch []isb.ReadMessage, msgs []isb.Message) {
	if !f.tok.Refundable() {
		return
	}
	f.gone = zeroedBools(f.gone, len(batch))
	for _, list := range [][]isb.Message{msgs, f.byFallback, f.byOnSuccess} {
		for i := range list {
			if o := list[i].Origin; o >= 0 && o < len(batch) {
				f.gone[o] = true
			}
		}
	}
	for i := range batch {
		if f.nacks[i] != nil {
			f.gone[i] = true
		}
	}
	f.tok.Refund(batch, f.gone)
}

// zeroedBools returns b resized to n, all false.
func zeroedBools(b []bool, n int) []bool {
	b = append(b[:0], make([]bool, n)...)
	return b
}
