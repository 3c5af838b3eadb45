package pipeline

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/udsconn"
	"github.com/sluiceflow/sluice/pkg/pipeline/sideinputs"
	"github.com/sluiceflow/sluice/pkg/udf"
	"github.com/sluiceflow/sluice/pkg/udf/sideinputclient"
	"github.com/sluiceflow/sluice/pkg/vertex"
)

// WithSideInputsDir is where the vertices that name side inputs find their
// values, a file per side input (default [sideinputs.DefaultDir], where
// numaflow-go's UDFs read them).
func WithSideInputsDir(dir string) Option { return func(o *options) { o.sideInputsDir = dir } }

// SideInputSocketDirs returns the socket directory of each side input of p's
// container, base being the process's: base itself when p has one side
// input (its files, sideinput.sock and sideinput-server-info, are no
// vertex's, so numaflow-go's side-input server, which knows only
// /var/run/numaflow, shares it with a vertex's containers), else
// [SocketDir](base, "side-input-"+name) for each.
func SideInputSocketDirs(p *config.Pipeline, base string) map[string]string {
	dirs := map[string]string{}
	for _, si := range p.Spec.SideInputs {
		dirs[si.Name] = base
		if len(p.Spec.SideInputs) > 1 {
			dirs[si.Name] = SocketDir(base, "side-input-"+si.Name)
		}
	}
	return dirs
}

// sideInputs is what a process runs of a pipeline's side inputs: the manager
// of them all, the files of those its vertices name, or both.
type sideInputs struct {
	manager *sideinputs.Manager // nil when another process runs the side inputs
	files   *sideinputs.Files   // nil when no vertex of the process names one
	remotes []*sideinputclient.Client
}

// newSideInputs builds the side inputs of a process of p that runs the
// manager (manage) and the vertices called names: their values travel in
// memory on memory buffers, in the bucket [sideinputs.BucketName] on
// JetStream. It returns nil when the process has nothing to do with side
// inputs.
func newSideInputs(ctx context.Context, p *config.Pipeline, o options, manage bool, names []string, cl *closers) (*sideInputs, error) {
	var named []string
	for _, name := range names {
		if v := p.Vertex(name); v != nil {
			for _, si := range v.SideInputs {
				if !slices.Contains(named, si) {
					named = append(named, si)
				}
			}
		}
	}
	manage = manage && len(p.Spec.SideInputs) > 0
	if !manage && len(named) == 0 {
		return nil, nil
	}
	var store sideinputs.Store = sideinputs.NewMemory()
	if o.backend == OnJetStream {
		js, err := OpenJetStream(ctx, p, o.log)
		if err != nil {
			return nil, err
		}
		*cl = append(*cl, js.Close)
		kv, err := sideinputs.OpenKV(ctx, js.conn.JetStream(), sideinputs.BucketName(p.Metadata.Name))
		if err != nil {
			return nil, err
		}
		store = kv
	}
	s := &sideInputs{}
	if len(named) > 0 {
		s.files = sideinputs.NewFiles(o.sideInputsDir, store, named, o.log)
	}
	if manage {
		retrievers := map[string]sideinputs.Retriever{}
		dirs := SideInputSocketDirs(p, o.socketDir)
		// A retrieval has the pipeline's limits.udfTimeout as its deadline.
		calls := udsconn.NewCalls(p.Spec.Limits.GetUDFTimeout(), nil)
		for _, si := range p.Spec.SideInputs {
			r := sideinputclient.New(dirs[si.Name], o.log.With(zap.String("sideInput", si.Name)), nil, udf.WithCalls(calls))
			*cl = append(*cl, r.Close)
			retrievers[si.Name] = r
			s.remotes = append(s.remotes, r)
		}
		m, err := sideinputs.NewManager(sideinputs.ManagerDeps{SideInputs: p.Spec.SideInputs, Retrievers: retrievers,
			Store: store, Log: o.log})
		if err != nil {
			return nil, err
		}
		s.manager = m
	}
	return s, nil
}

// run runs the manager and writes the files until ctx ends (then nil), or
// the files cannot be written or the store fails.
func (s *sideInputs) run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	if s.manager != nil {
		g.Go(func() error { return s.manager.Run(gctx) })
	}
	if s.files != nil {
		g.Go(func() error { return s.files.Run(gctx) })
	}
	err := g.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// gate is the option of vertex v, which waits for the side inputs it names.
func (s *sideInputs) gate(v *config.Vertex) []vertex.Option {
	if s == nil || s.files == nil || v == nil || len(v.SideInputs) == 0 {
		return nil
	}
	return []vertex.Option{vertex.WithSideInputs(s.files.Gate(v.SideInputs))}
}

// ready returns nil while every side input's container is connected.
func (s *sideInputs) ready() error {
	var errs []error
	for _, r := range s.remotes {
		errs = append(errs, r.Ready())
	}
	return errors.Join(errs...)
}

// SideInputsManager runs a pipeline's side inputs in a process of its own
// (vertex run --side-inputs-manager), for a pipeline whose vertices run in
// processes of their own: it asks each side input's container for its value
// and puts the values in the pipeline's JetStream bucket, where the vertices
// watch them. Create one with [NewSideInputsManager]; Ready may be called
// from any goroutine.
type SideInputsManager struct {
	pipeline string
	si       *sideInputs
	cl       closers
}

// SideInputsStatus is what /status serves for a [SideInputsManager].
type SideInputsStatus struct {
	// NotReady is what [SideInputsManager.Ready] says, "" when ready.
	NotReady string `json:"notReady"`
	// SideInputsManager is the pipeline's name.
	SideInputsManager string `json:"sideInputsManager"`
}

// NewSideInputsManager connects to p's JetStream server (waiting while it is
// down, until ctx ends) and opens the side inputs' bucket. p must be valid
// and have side inputs.
func NewSideInputsManager(ctx context.Context, p *config.Pipeline, opts ...Option) (*SideInputsManager, error) {
	if len(p.Spec.SideInputs) == 0 {
		return nil, fmt.Errorf("pipeline %s has no side inputs (spec.sideInputs)", p.Metadata.Name)
	}
	o, err := buildOptions(p.Metadata.Name, append(slices.Clip(opts), WithBackend(OnJetStream)))
	if err != nil {
		return nil, err
	}
	m := &SideInputsManager{pipeline: p.Metadata.Name}
	if m.si, err = newSideInputs(ctx, p, o, true, nil, &m.cl); err != nil {
		m.cl.closeAll()
		return nil, err
	}
	return m, nil
}

// Run asks the side inputs for values until ctx ends, and closes the manager.
func (m *SideInputsManager) Run(ctx context.Context) error {
	defer m.Close()
	return m.si.run(ctx)
}

// Ready returns nil while every side input's container is connected, else
// what the manager waits for.
func (m *SideInputsManager) Ready() error { return m.si.ready() }

// Status returns the manager's status, for /status; it may be called from
// any goroutine.
func (m *SideInputsManager) Status() SideInputsStatus {
	st := SideInputsStatus{SideInputsManager: m.pipeline}
	if err := m.Ready(); err != nil {
		st.NotReady = err.Error()
	}
	return st
}

// Close closes the containers' connections and the JetStream connection.
func (m *SideInputsManager) Close() error {
	m.cl.closeAll()
	m.cl = nil
	return nil
}

// sideInputsDirOrDefault is dir, or [sideinputs.DefaultDir] when dir is "".
func sideInputsDirOrDefault(dir string) string {
	if dir == "" {
		return sideinputs.DefaultDir
	}
	return filepath.Clean(dir)
}
