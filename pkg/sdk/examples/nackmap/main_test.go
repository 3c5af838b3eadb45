package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/apis/proto/common"
	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/sdktest"
	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
)

type datum []byte

func (d datum) ID() string                 { return "id" }
func (d datum) Keys() []string             { return []string{"k"} }
func (d datum) Value() []byte              { return d }
func (d datum) EventTime() time.Time       { return time.Time{} }
func (d datum) Watermark() time.Time       { return time.Time{} }
func (d datum) Headers() map[string]string { return nil }
func (d datum) UserMetadata() *mapper.UserMetadata {
	md := mapper.NewUserMetadata()
	md.AddKV("g", "k", []byte("v"))
	return md
}

func TestNackMap(t *testing.T) {
	opts, err := optionsFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	m := newNackMap(opts)
	render := func(msgs mapper.Messages) string {
		if len(msgs) != 1 {
			return fmt.Sprint(len(msgs), " messages")
		}
		if msgs[0].IsNack() {
			return "nack"
		}
		return fmt.Sprintf("%s %v %s", msgs[0].Value(), msgs[0].Keys(), msgs[0].UserMetadata())
	}
	steps := []struct{ payload, want string }{
		{"a", "nack"},
		{"b", "nack"},
		{"a", `a [k] g{k="v"}`},
		{"a", `a [k] g{k="v"}`},
		{"b", `b [k] g{k="v"}`},
		{"", "nack"},
		{"", ` [k] g{k="v"}`},
	}
	for i, st := range steps {
		if got := render(m.Map(context.Background(), []string{"k"}, datum(st.payload))); got != st.want {
			t.Errorf("step %d (%q): %s, want %s", i, st.payload, got, st.want)
		}
	}
}

// Of many concurrent deliveries of one payload, exactly one is nacked.
func TestNackMapConcurrent(t *testing.T) {
	m := newNackMap(nil)
	const n = 32
	var wg sync.WaitGroup
	nacks := make(chan bool, n)
	for range n {
		wg.Go(func() {
			nacks <- m.Map(context.Background(), nil, datum("same"))[0].IsNack()
		})
	}
	wg.Wait()
	close(nacks)
	count := 0
	for nacked := range nacks {
		if nacked {
			count++
		}
	}
	if count != 1 {
		t.Errorf("%d nacks, want 1", count)
	}
}

func TestOptionsFromEnv(t *testing.T) {
	cases := []struct {
		env  string
		want string // "" for an error
	}{
		{"", "delay none"},
		{"500ms", "delay 500"},
		{"2s", "delay 2000"},
		{"0s", "delay 0"},
		{"soon", ""},
		{"-1s", ""},
		{"1.5ms", ""},
	}
	for _, c := range cases {
		t.Run(c.env, func(t *testing.T) {
			t.Setenv("NACKMAP_DELAY", c.env)
			opts, err := optionsFromEnv()
			if c.want == "" {
				if err == nil || opts != nil {
					t.Fatalf("options %+v, want an error", opts)
				}
				if want := fmt.Sprintf("NACKMAP_DELAY=%q: ", c.env); !strings.HasPrefix(err.Error(), want) {
					t.Errorf("error %q does not name the variable and its value", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := "delay none"
			if opts.Delay != nil {
				got = fmt.Sprint("delay ", *opts.Delay)
			}
			if got != c.want || opts.Reason == nil || *opts.Reason != reason {
				t.Errorf("%s reason %v, want %s", got, opts.Reason, c.want)
			}
		})
	}
}

// The built binary nacks each payload once, with the delay of NACKMAP_DELAY,
// then passes it on with its keys and user metadata; it writes nothing to
// stdout and stops on SIGTERM.
func TestProcess(t *testing.T) {
	p := sdktest.StartProcess(t, sdktest.Build(t), serverinfo.KindMap, "NACKMAP_DELAY=250ms")
	stream, err := mapv1.NewMapClient(p.Conn).MapFn(sdktest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&mapv1.MapRequest{Handshake: &mapv1.Handshake{Sot: true}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := stream.Recv(); err != nil || !resp.GetHandshake().GetSot() {
		t.Fatalf("handshake: %v, %v", resp, err)
	}
	md := &common.Metadata{UserMetadata: map[string]*common.KeyValueGroup{"g": {KeyValue: map[string][]byte{"k": []byte("v")}}}}
	send := func(id, value string) {
		t.Helper()
		req := &mapv1.MapRequest{Id: id, Request: &mapv1.MapRequest_Request{Keys: []string{"key-" + value}, Value: []byte(value), Metadata: md}}
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	nack := []*mapv1.MapResponse_Result{{
		Tags: []string{mapper.NackTag}, Metadata: &common.Metadata{},
		NackOptions: &common.NackOptions{Delay: proto.Uint64(250), Reason: proto.String(reason)},
	}}
	pass := func(v string) []*mapv1.MapResponse_Result {
		return []*mapv1.MapResponse_Result{{Keys: []string{"key-" + v}, Value: []byte(v), Metadata: &common.Metadata{UserMetadata: md.UserMetadata}}}
	}
	recv := func(want map[string][]*mapv1.MapResponse_Result) {
		t.Helper()
		for range want {
			resp, err := stream.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if w := (&mapv1.MapResponse{Id: resp.GetId(), Results: want[resp.GetId()]}); !proto.Equal(resp, w) {
				t.Errorf("response\n%v\nwant\n%v", resp, w)
			}
		}
	}
	send("1", "a")
	send("2", "b")
	recv(map[string][]*mapv1.MapResponse_Result{"1": nack, "2": nack})
	// The redeliveries pass.
	send("3", "a")
	send("4", "b")
	recv(map[string][]*mapv1.MapResponse_Result{"3": pass("a"), "4": pass("b")})

	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("Recv = %v, want EOF", err)
	}
	if err := p.Terminate(t); err != nil {
		t.Fatalf("exit: %v\n%s", err, p.Stderr())
	}
	if p.Stdout() != "" {
		t.Errorf("stdout %q, want nothing", p.Stdout())
	}
}
