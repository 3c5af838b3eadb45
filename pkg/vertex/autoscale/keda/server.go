package keda

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluiceflow/sluice/pkg/apis/proto/externalscaler"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/vertex/autoscale"
)

// MetricName is the metric GetMetricSpec names and GetMetrics answers: the
// rule's replica count, with a target of 1 a replica.
const MetricName = "sluice-desired-replicas"

// MetadataVertex is the scalerMetadata key that names the vertex.
const MetadataVertex = "vertex"

// Vertex is one vertex the scaler serves.
type Vertex struct {
	// Name is the vertex's name: a MonoVertex's metadata.name, or a
	// pipeline vertex's name.
	Name string
	// Scale is the rule's config, from the vertex's scale block.
	Scale autoscale.Config
	// Status are the host:port addresses of its replicas' HTTP port
	// (--metrics-addr), each host a replica per IP it resolves to.
	Status []string
}

// Config is what a [Server] serves.
type Config struct {
	// Vertices are the vertices served, at least one.
	Vertices []Vertex
	// Interval is how often the replicas are read; 5s when 0.
	Interval time.Duration
	// Timeout bounds one read of a replica; 2s when 0.
	Timeout time.Duration
	// Log receives the warnings; none when nil.
	Log *zap.Logger
}

// Server serves KEDA's externalscaler.ExternalScaler for the vertices of
// its Config: it reads each vertex's replicas every Interval, asks the
// vertex's [autoscale.Scaler] for a count and answers KEDA from the last
// answer. Run reads; the RPCs never wait for a read. It is safe for
// concurrent use.
type Server struct {
	externalscaler.UnimplementedExternalScalerServer
	cfg     Config
	clk     clock.Clock
	reader  *reader
	targets map[string]*target
	names   []string
	log     *zap.Logger
}

// Option configures a Server.
type Option func(*Server)

// WithClock sets the clock of the rules and of the reads (clock.Real by
// default).
func WithClock(c clock.Clock) Option { return func(s *Server) { s.clk = c } }

var _ externalscaler.ExternalScalerServer = (*Server)(nil)

// New returns a Server for cfg.
func New(cfg Config, opts ...Option) (*Server, error) {
	if len(cfg.Vertices) == 0 {
		return nil, errors.New("keda: no vertex to serve")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	s := &Server{cfg: cfg, clk: clock.Real(), targets: map[string]*target{}, log: cfg.Log}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	for _, o := range opts {
		o(s)
	}
	s.reader = &reader{client: &http.Client{Timeout: cfg.Timeout}}
	for _, v := range cfg.Vertices {
		if _, dup := s.targets[v.Name]; dup {
			return nil, fmt.Errorf("keda: vertex %q given twice", v.Name)
		}
		if len(v.Status) == 0 {
			return nil, fmt.Errorf("keda: vertex %q has no replica address", v.Name)
		}
		rule, err := autoscale.New(v.Scale, autoscale.WithClock(s.clk))
		if err != nil {
			return nil, fmt.Errorf("keda: vertex %q: %w", v.Name, err)
		}
		s.targets[v.Name] = newTarget(v.Name, v.Status, rule)
		s.names = append(s.names, v.Name)
	}
	slices.Sort(s.names)
	return s, nil
}

// Run reads every vertex's replicas each Interval until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	for _, name := range s.names {
		t := s.targets[name]
		g.Go(func() error {
			for {
				s.Poll(ctx, t.name)
				if !clock.Sleep(ctx, s.clk, s.cfg.Interval) {
					return nil
				}
			}
		})
	}
	return g.Wait()
}

// Poll reads the replicas of one vertex and decides once, as Run does each
// Interval; it returns the count and the read's error.
func (s *Server) Poll(ctx context.Context, vertex string) (autoscale.Decision, error) {
	t := s.targets[vertex]
	if t == nil {
		return autoscale.Decision{}, s.unknown(vertex)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout+time.Second)
	defer cancel()
	d, o, err := t.poll(ctx, s.reader, s.clk.Now())
	if err != nil {
		s.log.Warn("replicas unreachable; holding the last count", zap.String("vertex", t.name),
			zap.Int("count", d.Replicas), zap.Error(err))
	} else {
		s.log.Debug("decided", zap.String("vertex", t.name), zap.Int("replicas", d.Replicas),
			zap.Stringer("reason", d.Reason), zap.Int("wanted", d.Wanted), zap.Int("fits", d.Fits),
			zap.Int("running", o.Replicas), zap.Int64("pending", o.Pending), zap.Float64("rate", o.Rate),
			zap.Any("limits", o.Limits), zap.Bool("throttled", o.Throttled), zap.Bool("paused", o.Paused), zap.Bool("cut", o.Cut))
	}
	return d, err
}

// Serve serves the service on each listener until ctx ends, and runs the
// reads; it stops the gRPC server gracefully at the end.
func (s *Server) Serve(ctx context.Context, listeners ...net.Listener) error {
	gs := grpc.NewServer()
	externalscaler.RegisterExternalScalerServer(gs, s)
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.Run(ctx) })
	for _, l := range listeners {
		g.Go(func() error {
			if err := gs.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				return err
			}
			return nil
		})
	}
	g.Go(func() error {
		<-ctx.Done()
		stopped := make(chan struct{})
		go func() { gs.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(5 * time.Second):
			gs.Stop()
		}
		return nil
	})
	return g.Wait()
}

func (s *Server) unknown(name string) error {
	return fmt.Errorf("%w: scalerMetadata.%s (%q) is not a vertex this scaler serves (%s)",
		ErrVertex, MetadataVertex, name, strings.Join(s.names, ", "))
}

// target returns the vertex a ScaledObjectRef names: its scalerMetadata's
// vertex, which may be left out when the scaler serves one vertex.
func (s *Server) target(ref *externalscaler.ScaledObjectRef) (*target, error) {
	name, ok := ref.GetScalerMetadata()[MetadataVertex]
	if !ok {
		if len(s.names) == 1 {
			return s.targets[s.names[0]], nil
		}
		return nil, status.Errorf(codes.InvalidArgument, "scalerMetadata.%s is missing; it names one of %s",
			MetadataVertex, strings.Join(s.names, ", "))
	}
	t := s.targets[name]
	if t == nil {
		return nil, status.Error(codes.InvalidArgument, s.unknown(name).Error())
	}
	return t, nil
}

// IsActive reports whether the vertex has something pending or processes
// messages; an error while its replicas cannot be read.
func (s *Server) IsActive(_ context.Context, ref *externalscaler.ScaledObjectRef) (*externalscaler.IsActiveResponse, error) {
	t, err := s.target(ref)
	if err != nil {
		return nil, err
	}
	st := t.state()
	if st.err != nil {
		return nil, status.Errorf(codes.Unavailable, "vertex %q: %v", t.name, st.err)
	}
	return &externalscaler.IsActiveResponse{Result: st.active}, nil
}

// StreamIsActive sends IsActive's answer at once and again at each change,
// until the client leaves; a read's error ends the stream with it.
func (s *Server) StreamIsActive(ref *externalscaler.ScaledObjectRef, stream grpc.ServerStreamingServer[externalscaler.IsActiveResponse]) error {
	t, err := s.target(ref)
	if err != nil {
		return err
	}
	for {
		st := t.state()
		if st.err != nil {
			return status.Errorf(codes.Unavailable, "vertex %q: %v", t.name, st.err)
		}
		if err := stream.Send(&externalscaler.IsActiveResponse{Result: st.active}); err != nil {
			return err
		}
		select {
		case <-st.changed:
		case <-stream.Context().Done():
			return nil
		}
	}
}

// GetMetricSpec names MetricName with a target of 1: KEDA's HPA divides
// the value by it, so the replicas it asks for are the rule's count.
func (s *Server) GetMetricSpec(_ context.Context, ref *externalscaler.ScaledObjectRef) (*externalscaler.GetMetricSpecResponse, error) {
	if _, err := s.target(ref); err != nil {
		return nil, err
	}
	return &externalscaler.GetMetricSpecResponse{MetricSpecs: []*externalscaler.MetricSpec{
		{MetricName: MetricName, TargetSize: 1, TargetSizeFloat: 1}}}, nil
}

// GetMetrics returns the rule's last count as MetricName's value; while
// the replicas cannot be read, the count before (the read logs a warning).
func (s *Server) GetMetrics(_ context.Context, req *externalscaler.GetMetricsRequest) (*externalscaler.GetMetricsResponse, error) {
	t, err := s.target(req.GetScaledObjectRef())
	if err != nil {
		return nil, err
	}
	n := t.state().decision.Replicas
	return &externalscaler.GetMetricsResponse{MetricValues: []*externalscaler.MetricValue{
		{MetricName: MetricName, MetricValue: int64(n), MetricValueFloat: float64(n)}}}, nil
}
