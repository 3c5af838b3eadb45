// Command logsink is a user-defined sink that prints each message's payload
// on standard output, one line per message (newlines in a payload are
// written as \n), and reports it written. To exercise the runtime's retry
// and fallback paths, a payload containing "fallback" is sent to the
// fallback sink, else one containing "fail" is reported failed; neither is
// printed.
//
// With LOGSINK_METADATA=1 each line also has the message's user metadata,
// after a tab: group/key=value, sorted, separated by spaces.
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
	"strings"

	"github.com/sluiceflow/sluice/pkg/sdk/sinker"
)

func main() {
	withMetadata := false
	switch v := os.Getenv("LOGSINK_METADATA"); v {
	case "", "0", "false":
	case "1", "true":
		withMetadata = true
	default:
		log.Fatalf("LOGSINK_METADATA=%q: want 1 or true, 0 or false", v)
	}
	if err := sinker.NewServer(logSink{w: os.Stdout, metadata: withMetadata}).Start(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// logSink writes payloads to w.
type logSink struct {
	w        io.Writer
	metadata bool // print the user metadata too
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
			if s.metadata {
				_ = w.WriteByte('\t')
				_, _ = w.WriteString(metadataText(d.UserMetadata()))
			}
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

// metadataText is md as group/key=value pairs, sorted, separated by spaces.
func metadataText(md *sinker.UserMetadata) string {
	var pairs []string
	for _, g := range md.Groups() {
		for _, k := range md.Keys(g) {
			pairs = append(pairs, g+"/"+k+"="+string(md.Value(g, k)))
		}
	}
	return strings.Join(pairs, " ")
}
