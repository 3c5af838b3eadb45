package vertex_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
	"github.com/sluiceflow/sluice/pkg/sdk/sinker"
	"github.com/sluiceflow/sluice/pkg/sdk/sourcer"
	"github.com/sluiceflow/sluice/pkg/vertex"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// receipts is a user-defined sink that keeps what it is given and answers
// ON_SUCCESS for the payloads ending in 3: with a receipt as the message for
// the on-success sink when they end in 33, else with none.
type receipts struct{ collector }

func (r *receipts) Sink(ctx context.Context, datums <-chan sinker.Datum) sinker.Responses {
	var rs sinker.Responses
	for d := range datums {
		v := string(d.Value())
		r.mu.Lock()
		r.got = append(r.got, v)
		r.mu.Unlock()
		switch {
		case len(v) > 1 && v[len(v)-2:] == "33":
			rs = append(rs, sinker.ResponseOnSuccessMessage(d.ID(), sinker.OnSuccessMessage{Value: []byte("receipt " + v)}))
		case v[len(v)-1] == '3':
			rs = append(rs, sinker.ResponseOnSuccess(d.ID()))
		default:
			rs = append(rs, sinker.ResponseOK(d.ID()))
		}
	}
	return rs
}

// serveSinks serves sinks in dir, each under its container type.
func serveSinks(t *testing.T, dir string, sinks map[string]sinker.Sinker) {
	for ct, s := range sinks {
		t.Setenv(serverinfo.EnvContainerType, ct)
		srv := sinker.NewServer(s, sinker.WithSocketDir(dir))
		serve(t, srv.Start)
	}
	t.Setenv(serverinfo.EnvContainerType, "")
}

// TestOnSuccessSink runs a MonoVertex whose user-defined sink answers
// ON_SUCCESS for some messages, with a user-defined on-success sink (the
// ons-udsink container): those messages, or the sink's message in their
// place, reach the on-success sink, and every offset is acked.
func TestOnSuccessSink(t *testing.T) {
	dir, err := os.MkdirTemp("", "ons")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	const count = 200
	src := &counting{count: count, acked: map[int]bool{}}
	primary, ons := &receipts{}, &collector{}
	serveSinks(t, dir, map[string]sinker.Sinker{"udsink": primary, "ons-udsink": ons})
	serve(t, sourcer.NewServer(src, sourcer.WithSocketDir(dir)).Start)

	v, err := vertex.New(vertexconfig.FromMonoVertex(monoVertex(t, "ons", `  limits:
    readBatchSize: 50
    readTimeout: 100ms
  source:
    udsource:
      container: {image: source}
  sink:
    udsink:
      container: {image: sink}
    onSuccess:
      udsink:
        container: {image: on-success}
`)), vertex.WithSocketDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	r := runtest.Start(t, v)
	runtest.WaitFor(t, "every message acked", func() bool { return src.ackedCount() == count })
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
	if n := len(primary.values()); n != count {
		t.Fatalf("sink got %d; want %d", n, count)
	}
	var want []string
	for i := 3; i < count; i += 10 {
		if i%100 == 33 {
			want = append(want, fmt.Sprintf("receipt %d", i))
		} else {
			want = append(want, fmt.Sprint(i))
		}
	}
	got := ons.values()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("on-success sink got %v; want %v", got, want)
	}
}

// TestBypass runs a MonoVertex whose map, a real gRPC server, tags the
// messages ending in 1 "invalid" and those ending in 2 "done": bypass sends
// them to the fallback and on-success sinks, user-defined too, and the rest
// to the sink.
func TestBypass(t *testing.T) {
	dir, err := os.MkdirTemp("", "byp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	const count = 100
	src := &counting{count: count, acked: map[int]bool{}}
	primary, fallback, ons := &collector{}, &collector{}, &collector{}
	serveSinks(t, dir, map[string]sinker.Sinker{"udsink": primary, "fb-udsink": fallback, "ons-udsink": ons})
	serve(t, sourcer.NewServer(src, sourcer.WithSocketDir(dir)).Start)
	serve(t, mapper.NewServer(mapper.MapperFunc(func(_ context.Context, _ []string, d mapper.Datum) mapper.Messages {
		m := mapper.NewMessage(d.Value())
		switch d.Value()[len(d.Value())-1] {
		case '1':
			m = m.WithTags([]string{"invalid"})
		case '2':
			m = m.WithTags([]string{"done", "x"})
		}
		return mapper.Messages{m}
	}), mapper.WithSocketDir(dir)).Start)

	v, err := vertex.New(vertexconfig.FromMonoVertex(monoVertex(t, "byp", `  limits:
    readBatchSize: 20
    readTimeout: 100ms
  source:
    udsource:
      container: {image: source}
  udf:
    container: {image: map}
  sink:
    udsink:
      container: {image: sink}
    fallback:
      udsink:
        container: {image: fallback}
    onSuccess:
      udsink:
        container: {image: on-success}
  bypass:
    fallback:
      tags:
        values: [invalid]
    onSuccess:
      tags:
        operator: and
        values: [done, x]
`)), vertex.WithSocketDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	r := runtest.Start(t, v)
	runtest.WaitFor(t, "every message acked", func() bool { return src.ackedCount() == count })
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		got    []string
		ending byte
		want   int
	}{{"sink", primary.values(), 0, 80}, {"fallback sink", fallback.values(), '1', 10}, {"on-success sink", ons.values(), '2', 10}} {
		if len(c.got) != c.want {
			t.Errorf("%s got %d messages; want %d", c.name, len(c.got), c.want)
		}
		for _, v := range c.got {
			if e := v[len(v)-1]; (c.ending == 0 && (e == '1' || e == '2')) || (c.ending != 0 && e != c.ending) {
				t.Errorf("%s got %q", c.name, v)
			}
		}
	}
}
