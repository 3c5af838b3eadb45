package mapclient_test

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/sdk/batchmapper"
	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
	"github.com/sluiceflow/sluice/pkg/sdk/sourcetransformer"
	"github.com/sluiceflow/sluice/pkg/udf"
	"github.com/sluiceflow/sluice/pkg/udf/mapclient"
)

// barrier is a function that answers nothing until n messages wait in it at
// once, or the test's patience runs out.
type barrier struct {
	n       int
	mu      sync.Mutex
	waiting int
	all     chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, all: make(chan struct{})} }

// wait reports whether n messages came to wait together.
func (b *barrier) wait(ctx context.Context) bool {
	b.mu.Lock()
	if b.waiting++; b.waiting == b.n {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
		return true
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
	}
	return false
}

// mapAtOnce maps one batch through each of ms at the same time and returns
// their results.
func mapAtOnce(t *testing.T, ms []udf.Mapper, batches [][]string) [][]string {
	t.Helper()
	got := make([][]string, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Go(func() {
			out, _, err := m.Map(context.Background(), messages(batches[i]...), nil)
			if err != nil {
				t.Errorf("mapper %d: %v", i, err)
			}
			for _, o := range out {
				got[i] = append(got[i], string(o.Value))
			}
		})
	}
	wg.Wait()
	return got
}

// forks returns r and n forks of it, closed when the test ends.
func forks(t *testing.T, r *mapclient.Client, n int) []udf.Mapper {
	ms := []udf.Mapper{r}
	for range n {
		f := r.Fork()
		t.Cleanup(func() { f.(io.Closer).Close() })
		ms = append(ms, f)
	}
	return ms
}

// TestForksMapAtOnce checks that the forks of a remote map or transformer
// have batches in flight at the same time, each answered with its own
// results: the function answers only once a message of every batch waits in
// it.
func TestForksMapAtOnce(t *testing.T) {
	batches := [][]string{{"a1", "a2"}, {"b1"}, {"c1", "c2", "c3"}}
	want := "[[A1 A2] [B1] [C1 C2 C3]]"
	upper := func(ctx context.Context, b *barrier, v []byte) []byte {
		if v[1] == '1' && !b.wait(ctx) {
			return []byte("alone")
		}
		return []byte(strings.ToUpper(string(v)))
	}
	t.Run("map", func(t *testing.T) {
		dir, b := socketDir(t), newBarrier(len(batches))
		serve(t, mapper.NewServer(mapper.MapperFunc(func(ctx context.Context, _ []string, d mapper.Datum) mapper.Messages {
			return mapper.Messages{mapper.NewMessage(upper(ctx, b, d.Value()))}
		}), mapper.WithSocketDir(dir)).Start)
		r := mapclient.New(dir, nil)
		connect(t, r)
		if got := fmtResults(mapAtOnce(t, forks(t, r, 2), batches)); got != want {
			t.Fatalf("got %s; want %s", got, want)
		}
	})
	t.Run("batch map", func(t *testing.T) {
		dir, b := socketDir(t), newBarrier(len(batches))
		serve(t, batchmapper.NewServer(batchmapper.BatchMapperFunc(func(ctx context.Context, datums <-chan batchmapper.Datum) batchmapper.BatchResponses {
			var out batchmapper.BatchResponses
			for d := range datums {
				out = append(out, batchmapper.NewBatchResponse(d.ID()).Append(batchmapper.NewMessage(upper(ctx, b, d.Value()))))
			}
			return out
		}), batchmapper.WithSocketDir(dir)).Start)
		r := mapclient.New(dir, nil)
		connect(t, r)
		if got := fmtResults(mapAtOnce(t, forks(t, r, 2), batches)); got != want {
			t.Fatalf("got %s; want %s", got, want)
		}
	})
	t.Run("transformer", func(t *testing.T) {
		dir, b := socketDir(t), newBarrier(len(batches))
		serve(t, sourcetransformer.NewServer(sourcetransformer.SourceTransformerFunc(func(ctx context.Context, _ []string, d sourcetransformer.Datum) sourcetransformer.Messages {
			return sourcetransformer.Messages{sourcetransformer.NewMessage(upper(ctx, b, d.Value()), d.EventTime())}
		}), sourcetransformer.WithSocketDir(dir)).Start)
		r := mapclient.NewTransformer(dir, nil)
		connect(t, r)
		if got := fmtResults(mapAtOnce(t, forks(t, r, 2), batches)); got != want {
			t.Fatalf("got %s; want %s", got, want)
		}
	})
}

func fmtResults(got [][]string) string {
	var parts []string
	for _, g := range got {
		parts = append(parts, "["+strings.Join(g, " ")+"]")
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// TestClosedForkLeavesTheConnection checks that closing a fork closes only
// its stream: the remote it came from goes on mapping.
func TestClosedForkLeavesTheConnection(t *testing.T) {
	dir := socketDir(t)
	serve(t, mapper.NewServer(mapper.MapperFunc(evenOdd), mapper.WithSocketDir(dir)).Start)
	r := mapclient.New(dir, nil)
	connect(t, r)
	f := r.Fork()
	if out, _, err := f.Map(context.Background(), messages("1"), nil); err != nil || len(out) != 1 {
		t.Fatalf("fork: %d results, %v", len(out), err)
	}
	if err := f.(io.Closer).Close(); err != nil {
		t.Fatal(err)
	}
	if out, _, err := r.Map(context.Background(), messages("2"), nil); err != nil || len(out) != 1 {
		t.Fatalf("after the fork closed: %d results, %v", len(out), err)
	}
}
