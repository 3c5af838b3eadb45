package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	sinkv1 "github.com/sluiceflow/sluice/pkg/apis/proto/sink/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/sdktest"
	"github.com/sluiceflow/sluice/pkg/sdk/sinker"
)

type datum struct{ id, value string }

func (d datum) ID() string                 { return d.id }
func (d datum) Keys() []string             { return nil }
func (d datum) Value() []byte              { return []byte(d.value) }
func (d datum) EventTime() time.Time       { return time.Time{} }
func (d datum) Watermark() time.Time       { return time.Time{} }
func (d datum) Headers() map[string]string { return nil }
func (d datum) UserMetadata() *sinker.UserMetadata {
	return sinker.NewUserMetadata()
}

func sink(s logSink, values ...string) sinker.Responses {
	ch := make(chan sinker.Datum, len(values))
	for i, v := range values {
		ch <- datum{fmt.Sprint(i), v}
	}
	close(ch)
	return s.Sink(context.Background(), ch)
}

func render(resps sinker.Responses) string {
	var out []string
	for _, r := range resps {
		s := r.ID() + ":"
		switch {
		case r.OK():
			s += "ok"
		case r.IsFallback():
			s += "fallback"
		default:
			s += "failed(" + r.Err() + ")"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func TestLogSink(t *testing.T) {
	var buf bytes.Buffer
	got := render(sink(logSink{w: &buf}, "hello", "please fail", "use fallback", "two\nlines", "fallback, do not fail"))
	if want := "0:ok 1:failed(payload asks to fail) 2:fallback 3:ok 4:fallback"; got != want {
		t.Errorf("responses %s\nwant %s", got, want)
	}
	if want := "hello\ntwo\\nlines\n"; buf.String() != want {
		t.Errorf("output %q, want %q", buf.String(), want)
	}
}

type brokenWriter struct{}

func (brokenWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestLogSinkWriteError(t *testing.T) {
	got := render(sink(logSink{w: brokenWriter{}}, "a", "fallback"))
	if want := "0:failed(writing to stdout: disk full) 1:fallback"; got != want {
		t.Errorf("responses %s, want %s", got, want)
	}
}

// The built binary, as a fallback sink (by container type), prints what it
// writes and stops on SIGTERM.
func TestProcess(t *testing.T) {
	p := sdktest.StartProcess(t, sdktest.Build(t), serverinfo.KindFallbackSink, "NUMAFLOW_UD_CONTAINER_TYPE=fb-udsink")
	stream, err := sinkv1.NewSinkClient(p.Conn).SinkFn(sdktest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&sinkv1.SinkRequest{Handshake: &sinkv1.Handshake{Sot: true}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := stream.Recv(); err != nil || !resp.GetHandshake().GetSot() {
		t.Fatalf("handshake: %v, %v", resp, err)
	}
	for batch, values := range [][]string{{"first", "fail me"}, {"fallback please", "last"}} {
		for i, v := range values {
			req := &sinkv1.SinkRequest{Request: &sinkv1.SinkRequest_Request{Id: fmt.Sprintf("%d%d", batch, i), Value: []byte(v)}}
			if err := stream.Send(req); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Send(&sinkv1.SinkRequest{Status: &sinkv1.TransmissionStatus{Eot: true}}); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range resp.GetResults() {
			got = append(got, r.GetId()+":"+r.GetStatus().String())
		}
		want := [][]string{{"00:SUCCESS", "01:FAILURE"}, {"10:FALLBACK", "11:SUCCESS"}}[batch]
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("batch %d: %v, want %v", batch, got, want)
		}
		if resp, err := stream.Recv(); err != nil || !resp.GetStatus().GetEot() {
			t.Fatalf("eot: %v, %v", resp, err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("Recv = %v, want EOF", err)
	}
	if err := p.Terminate(t); err != nil {
		t.Fatalf("exit: %v\n%s", err, p.Stderr())
	}
	if p.Stdout() != "first\nlast\n" {
		t.Errorf("stdout %q", p.Stdout())
	}
	sdktest.AssertRemoved(t, filepath.Join(p.Dir, serverinfo.FallbackSinkSocket), filepath.Join(p.Dir, serverinfo.FallbackSinkInfoFile))
}

func TestLogSinkMetadata(t *testing.T) {
	md := sinker.NewUserMetadata()
	md.AddKV("b", "k", []byte("2"))
	md.AddKV("a", "y", []byte("1"))
	md.AddKV("a", "x", []byte("0"))
	if got := metadataText(md); got != "a/x=0 a/y=1 b/k=2" {
		t.Fatalf("metadataText = %q", got)
	}
	var buf bytes.Buffer
	sink(logSink{w: &buf, metadata: true}, "v")
	if buf.String() != "v\t\n" {
		t.Fatalf("line %q; want the value, a tab and no metadata", buf.String())
	}
}
