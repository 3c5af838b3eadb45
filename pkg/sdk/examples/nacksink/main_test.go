package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

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

// sink passes values to s as one batch and renders the responses.
func sink(s *nackSink, values ...string) string {
	ch := make(chan sinker.Datum, len(values))
	for i, v := range values {
		ch <- datum{fmt.Sprint(i), v}
	}
	close(ch)
	var out []string
	for _, r := range s.Sink(context.Background(), ch) {
		switch {
		case r.OK():
			out = append(out, r.ID()+":ok")
		case r.IsNack():
			out = append(out, r.ID()+":nack")
		default:
			out = append(out, r.ID()+":failed("+r.Err()+")")
		}
	}
	return strings.Join(out, " ")
}

func TestNackSink(t *testing.T) {
	var buf bytes.Buffer
	s := newNackSink(&buf)
	batches := []struct{ values, want string }{
		{"1 2 3 x -7 10", "0:nack 1:ok 2:nack 3:ok 4:nack 5:ok"},
		{"1 3 5 -7 1", "0:ok 1:ok 2:nack 3:ok 4:ok"},
		{"5", "0:ok"},
	}
	for i, b := range batches {
		if got := sink(s, strings.Fields(b.values)...); got != b.want {
			t.Errorf("batch %d: %s, want %s", i, got, b.want)
		}
	}
	if want := "2\nx\n10\n1\n3\n-7\n1\n5\n"; buf.String() != want {
		t.Errorf("output %q, want %q", buf.String(), want)
	}
}

func TestIsOddInteger(t *testing.T) {
	for v, want := range map[string]bool{
		"1": true, "-7": true, "+9": true, "123456789012345678901234567890123": true,
		"0": false, "2": false, "-10": false, "": false, "-": false, "1.5": false, "x1": false, "1 ": false, " 1": false,
	} {
		if got := isOddInteger([]byte(v)); got != want {
			t.Errorf("isOddInteger(%q) = %v", v, got)
		}
	}
}

type brokenWriter struct{}

func (brokenWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteError(t *testing.T) {
	if got, want := sink(newNackSink(brokenWriter{}), "2", "3"), "0:failed(writing to stdout: disk full) 1:nack"; got != want {
		t.Errorf("responses %s, want %s", got, want)
	}
}

// The built binary nacks odd integers once (status NACK, no options) and
// prints everything else, and the odd ones when they come again, exactly
// once; it stops on SIGTERM.
func TestProcess(t *testing.T) {
	p := sdktest.StartProcess(t, sdktest.Build(t), serverinfo.KindSink)
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
	batches := []struct {
		values []string
		want   []sinkv1.Status
	}{
		{[]string{"1", "2", "3"}, []sinkv1.Status{sinkv1.Status_NACK, sinkv1.Status_SUCCESS, sinkv1.Status_NACK}},
		{[]string{"1", "3"}, []sinkv1.Status{sinkv1.Status_SUCCESS, sinkv1.Status_SUCCESS}},
	}
	for bi, b := range batches {
		for i, v := range b.values {
			req := &sinkv1.SinkRequest{Request: &sinkv1.SinkRequest_Request{Id: fmt.Sprintf("%d-%d", bi, i), Value: []byte(v)}}
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
		want := &sinkv1.SinkResponse{}
		for i, st := range b.want {
			want.Results = append(want.Results, &sinkv1.SinkResponse_Result{Id: fmt.Sprintf("%d-%d", bi, i), Status: st})
		}
		if !proto.Equal(resp, want) {
			t.Errorf("batch %d: %v\nwant %v", bi, resp, want)
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
	if p.Stdout() != "2\n1\n3\n" {
		t.Errorf("stdout %q, want %q", p.Stdout(), "2\n1\n3\n")
	}
}
