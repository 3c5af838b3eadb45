package serve

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
	"github.com/sluiceflow/sluice/pkg/clock"
)

// Defaults of a forwardProbe.
const (
	// forwardProbeTimeout is how long the user's IsReady has to answer.
	forwardProbeTimeout = time.Second
	// forwardProbeEvery is how long an answer of the user's IsReady is
	// kept: the served IsReady and /readyz ask the user's server at most
	// once in that time, however often they are asked.
	forwardProbeEvery = time.Second
)

// forwardProbe tells whether the user's map server on --forward takes work:
// its server-info file and socket are there and its own IsReady answers
// true within the timeout. An answer is kept for the probe's interval, so
// the user's server is asked at most once in it. It is safe for concurrent
// use; a caller that asks while the user's server is being asked waits for
// that answer.
type forwardProbe struct {
	dir     string // the user's server's directory: its server-info file and socket
	clock   clock.Clock
	timeout time.Duration
	every   time.Duration

	mu     sync.Mutex
	asked  time.Time // when the user's server was last asked; zero: never
	last   error     // what it answered then
	sock   string    // the socket cc is a client of
	cc     *grpc.ClientConn
	closed bool
}

// newForwardProbe returns the probe of the user's map server in dir.
func newForwardProbe(dir string, clk clock.Clock) *forwardProbe {
	return &forwardProbe{dir: dir, clock: clk, timeout: forwardProbeTimeout, every: forwardProbeEvery}
}

// Ready returns nil while the user's server takes work, or why not: its
// server-info file or socket is gone, or its IsReady fails, times out or
// answers false.
func (p *forwardProbe) Ready() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	if !p.asked.IsZero() && now.Sub(p.asked) < p.every {
		return p.last
	}
	p.asked, p.last = now, p.ask()
	return p.last
}

// ask asks the user's server, with p.mu held.
func (p *forwardProbe) ask() error {
	if p.closed {
		return fmt.Errorf("the --forward server's probe is closed")
	}
	info, err := serverinfo.Read(filepath.Join(p.dir, serverinfo.KindMap.InfoFile()))
	if err != nil {
		return fmt.Errorf("the --forward server is gone: %w", err)
	}
	sock := filepath.Join(p.dir, info.MapKind().Socket())
	if _, err := os.Stat(sock); err != nil {
		return fmt.Errorf("the --forward server is gone: %w", err)
	}
	if p.cc == nil || p.sock != sock {
		if p.cc != nil {
			p.cc.Close()
		}
		cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return fmt.Errorf("the --forward server's socket %s: %w", sock, err)
		}
		p.cc, p.sock = cc, sock
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	resp, err := mapv1.NewMapClient(p.cc).IsReady(ctx, &emptypb.Empty{})
	if err != nil {
		// The next ask dials afresh, not after gRPC's reconnect backoff,
		// which grows to minutes while the server is down.
		p.cc.Close()
		p.cc = nil
	}
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("the --forward server's IsReady on %s did not answer within %v", sock, p.timeout)
	case err != nil:
		return fmt.Errorf("the --forward server's IsReady on %s failed: %w", sock, err)
	case !resp.GetReady():
		return fmt.Errorf("the --forward server's IsReady on %s answers false", sock)
	}
	return nil
}

// Close closes the probe's connection; Ready answers not ready from then
// on. It is safe to call twice.
func (p *forwardProbe) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cc != nil {
		p.cc.Close()
		p.cc = nil
	}
	p.closed = true
	p.asked = time.Time{}
}
