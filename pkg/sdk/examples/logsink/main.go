// Command logsink is a user-defined sink that prints each message's payload
// on standard output, one line per message (newlines in a payload are
// written as \n), and reports it written. To exercise the runtime's retry
// and fallback paths, a payload containing "fallback" is sent to the
// fallback sink, else one containing "fail" is reported failed; neither is
// printed.
//
// Run it as a fallback sink by setting NUMAFLOW_UD_CONTAINER_TYPE=fb-udsink.
package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log"
	"os"

	"github.com/sluiceflow/sluice/pkg/sdk/sinker"
)

func main() {
	if err := sinker.NewServer(logSink{w: os.Stdout}).Start(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// logSink writes payloads to w.
type logSink struct {
	w io.Writer
}

func (s logSink) Sink(_ context.Context, datums <-chan sinker.Datum) sinker.Responses {
	w := bufio.NewWriter(s.w)
	var out sinker.Responses
	for d := range datums {
		v := d.Value()
		switch {
		case bytes.Contains(v, []byte("fallback")):
			out = append(out, sinker.ResponseFallback(d.ID()))
		case bytes.Contains(v, []byte("fail")):
			out = append(out, sinker.ResponseFailure(d.ID(), "payload asks to fail"))
		default:
			_, _ = w.Write(bytes.ReplaceAll(v, []byte("\n"), []byte(`\n`)))
			_ = w.WriteByte('\n')
			out = append(out, sinker.ResponseOK(d.ID()))
		}
	}
	if err := w.Flush(); err != nil {
		// Nothing is known to be written: report the whole batch failed.
		for i, r := range out {
			if r.OK() {
				out[i] = sinker.ResponseFailure(r.ID(), "writing to stdout: "+err.Error())
			}
		}
	}
	return out
}
