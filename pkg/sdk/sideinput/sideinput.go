package sideinput

import (
	"context"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	sideinputv1 "github.com/sluiceflow/sluice/pkg/apis/proto/sideinput/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/udfserver"
)

// Retriever returns a side input's current value.
type Retriever interface {
	// Retrieve is called on the side input's schedule, and once at start.
	Retrieve(ctx context.Context) Message
}

// RetrieveFunc is a Retriever that is a function.
type RetrieveFunc func(ctx context.Context) Message

// Retrieve calls f.
func (f RetrieveFunc) Retrieve(ctx context.Context) Message { return f(ctx) }

// Message is a side input's answer: a value for the vertices, or none.
type Message struct {
	value       []byte
	noBroadcast bool
}

// BroadcastMessage is value, for every vertex that names the side input.
func BroadcastMessage(value []byte) Message { return Message{value: value} }

// NoBroadcastMessage says the side input has no new value: the vertices
// keep the one they have.
func NoBroadcastMessage() Message { return Message{noBroadcast: true} }

// Option configures a Server.
type Option func(*udfserver.Config)

// WithSocketDir sets the directory of the socket and server-info file. Without
// it, the directory is the value of the environment variable SLUICE_UDS_DIR
// (which `vertex run --spawn` sets for the processes it starts), or
// /var/run/numaflow when that is unset.
func WithSocketDir(dir string) Option {
	return func(c *udfserver.Config) { c.SocketDir = dir }
}

// Server serves a Retriever.
type Server struct {
	srv *udfserver.Server
}

// NewServer returns a server for r, which must not be nil.
func NewServer(r Retriever, opts ...Option) *Server {
	var cfg udfserver.Config
	for _, o := range opts {
		o(&cfg)
	}
	srv := udfserver.New(serverinfo.KindSideInput, cfg)
	sideinputv1.RegisterSideInputServer(srv.Registrar(), &service{r: r, srv: srv})
	return &Server{srv: srv}
}

// Start listens on the socket, writes the server-info file once listening,
// and serves until ctx ends or the process gets SIGTERM or SIGINT; then it
// stops and removes the socket and the server-info file. It returns nil
// after such a stop, and an error if the server could not start or Retrieve
// panicked.
func (s *Server) Start(ctx context.Context) error { return s.srv.Run(ctx) }

type service struct {
	sideinputv1.UnimplementedSideInputServer
	r   Retriever
	srv *udfserver.Server
}

func (s *service) IsReady(context.Context, *emptypb.Empty) (*sideinputv1.ReadyResponse, error) {
	return &sideinputv1.ReadyResponse{Ready: s.srv.Ready()}, nil
}

func (s *service) RetrieveSideInput(ctx context.Context, _ *emptypb.Empty) (_ *sideinputv1.SideInputResponse, err error) {
	defer s.srv.Recover(&err)
	m := s.r.Retrieve(ctx)
	return &sideinputv1.SideInputResponse{Value: m.value, NoBroadcast: m.noBroadcast}, nil
}

// DefaultDir is where side-input files are, unless $SLUICE_SIDE_INPUTS_DIR
// says otherwise.
const DefaultDir = "/var/numaflow/side-inputs"

// EnvDir names the environment variable that overrides DefaultDir.
const EnvDir = "SLUICE_SIDE_INPUTS_DIR"

// Dir is the directory of the side-input files: $SLUICE_SIDE_INPUTS_DIR, or
// DefaultDir.
func Dir() string {
	if d := os.Getenv(EnvDir); d != "" {
		return d
	}
	return DefaultDir
}

// Path is the file of the side input called name.
func Path(name string) string { return filepath.Join(Dir(), name) }

// Read returns the current value of the side input called name; an error
// matching fs.ErrNotExist while it has none yet.
func Read(name string) ([]byte, error) { return os.ReadFile(Path(name)) }
