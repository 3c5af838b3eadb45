package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluiceflow/sluice/pkg/observe"
	"github.com/sluiceflow/sluice/pkg/pipeline"
	"github.com/sluiceflow/sluice/pkg/vertex"
)

// PagePollInterval is how often the page variant asks for /status/live, as
// the status page does.
const PagePollInterval = time.Second

// PageVariant returns the target with its rate limits on, measured while
// its /status/live is served on a loopback port and asked for once a
// second, from the start of each run, as the status page does: the page open
// on the vertex. Its [Runs] count the answers in Polls.
func (t *Target) PageVariant(name string) Variant {
	return Variant{Name: name, file: t.on, open: openPage}
}

// openPage serves r's /status/live on a loopback port and asks for it at
// once and then every PagePollInterval, reading each answer whole, until
// the returned close is called; close returns the answers read.
func openPage(r Runner) (close func() int, err error) {
	var data func(since int64) any
	switch r := r.(type) {
	case *vertex.Vertex:
		data = func(since int64) any { return r.PageView(since) }
	case *pipeline.Pipeline:
		data = func(since int64) any { return r.PageView(since) }
	default:
		return nil, fmt.Errorf("bench: %s: %T serves no /status/live", VariantPage, r)
	}
	srv, err := observe.Listen("127.0.0.1:0", observe.Handlers{Gatherer: prometheus.NewRegistry(), PageData: data}, nil)
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w", VariantPage, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var polls atomic.Int64
	wg.Go(func() { srv.Serve(ctx) })
	wg.Go(func() { pollPage(ctx, "http://"+srv.Addr().String()+observe.PageDataPath, &polls) })
	return func() int {
		cancel()
		wg.Wait()
		return int(polls.Load())
	}, nil
}

// pollPage asks for url at once and then every PagePollInterval until ctx
// is done, counting in polls the answers read whole.
func pollPage(ctx context.Context, url string, polls *atomic.Int64) {
	tick := time.NewTicker(PagePollInterval)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			if _, err := io.Copy(io.Discard, resp.Body); err == nil && resp.StatusCode == http.StatusOK {
				polls.Add(1)
			}
			resp.Body.Close()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
