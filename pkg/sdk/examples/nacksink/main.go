// Command nacksink is a user-defined sink that prints each message's
// payload on standard output, one line per message (newlines in a payload
// are written as \n), as logsink does, except that it negatively
// acknowledges (nacks) a payload that is an odd integer ("1", "-7",
// "12345") the first time it sees it, without printing it. The runtime
// delivers such a message again, and it is printed then: each message
// reaches standard output once, an odd one after one nack. It exercises
// the runtime's sink nack path end to end, and remembers every odd payload
// it has nacked, in memory (a payload is nacked once, however many
// messages carry it).
package main

import (
	"bytes"
	"context"
	"io"
	"log"
	"os"
	"sync"

	"github.com/sluiceflow/sluice/pkg/sdk/sinker"
)

func main() {
	if err := sinker.NewServer(newNackSink(os.Stdout)).Start(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// nackSink writes payloads to w, nacking odd integers once. It is safe for
// concurrent use: each batch is written to w in one Write.
type nackSink struct {
	wmu sync.Mutex // serialises writes to w
	w   io.Writer

	mu     sync.Mutex
	nacked map[string]struct{}
}

func newNackSink(w io.Writer) *nackSink {
	return &nackSink{w: w, nacked: make(map[string]struct{})}
}

func (s *nackSink) Sink(_ context.Context, datums <-chan sinker.Datum) sinker.Responses {
	var buf bytes.Buffer
	var out sinker.Responses
	for d := range datums {
		v := d.Value()
		if s.firstOdd(v) {
			out = append(out, sinker.ResponseNack(d.ID(), nil))
			continue
		}
		buf.Write(bytes.ReplaceAll(v, []byte("\n"), []byte(`\n`)))
		buf.WriteByte('\n')
		out = append(out, sinker.ResponseOK(d.ID()))
	}
	if err := s.write(buf.Bytes()); err != nil {
		// Nothing is known to be written: report the written ones failed.
		for i, r := range out {
			if r.OK() {
				out[i] = sinker.ResponseFailure(r.ID(), "writing to stdout: "+err.Error())
			}
		}
	}
	return out
}

func (s *nackSink) write(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, err := s.w.Write(p)
	return err
}

// firstOdd reports whether v is an odd integer not nacked before, and
// records it as nacked if so.
func (s *nackSink) firstOdd(v []byte) bool {
	if !isOddInteger(v) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.nacked[string(v)]; ok {
		return false
	}
	s.nacked[string(v)] = struct{}{}
	return true
}

// isOddInteger reports whether v is a decimal integer, of any size, with an
// optional sign, that is odd.
func isOddInteger(v []byte) bool {
	if len(v) > 0 && (v[0] == '-' || v[0] == '+') {
		v = v[1:]
	}
	if len(v) == 0 {
		return false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
	}
	return (v[len(v)-1]-'0')%2 == 1
}
