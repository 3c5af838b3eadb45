// Package sdktest helps the SDK's tests run real servers: on a short
// temporary socket directory, in-process (Start) or as a built example
// binary (Build, StartProcess), with a real gRPC client connection.
package sdktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluiceflow/sluice/internal/serverinfo"
)

// Timeout bounds every wait of a test helper.
const Timeout = 10 * time.Second

// poll is how often a helper looks for a server-info file.
const poll = 2 * time.Millisecond

// Dir returns a new temporary directory with a short path (a unix socket
// path is at most 107 bytes, which t.TempDir can exceed), removed when the
// test ends.
func Dir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sdk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// Dial connects to the unix socket at path with the protocol's message size
// limits. The connection is closed when the test ends.
func Dial(t testing.TB, path string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(serverinfo.MaxMessageSize),
			grpc.MaxCallSendMsgSize(serverinfo.MaxMessageSize),
		))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// Context returns a context that ends after Timeout or with the test.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), Timeout)
	t.Cleanup(cancel)
	return ctx
}

// Server is a server started in-process by Start.
type Server struct {
	Dir    string
	Kind   serverinfo.Kind
	Info   serverinfo.ServerInfo // as read from the server-info file
	Conn   *grpc.ClientConn
	cancel context.CancelFunc
	done   chan error
	ended  bool
	err    error
}

// Start runs start (a server's Start method) in a goroutine, waits until the
// server-info file of kind appears in dir, and dials the socket. The server
// is stopped, and the connection closed, when the test ends.
func Start(t testing.TB, dir string, kind serverinfo.Kind, start func(context.Context) error) *Server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{Dir: dir, Kind: kind, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- start(ctx) }()
	t.Cleanup(func() { _, _ = s.wait(Timeout) })
	t.Cleanup(cancel)
	info, err := WaitForFile(filepath.Join(dir, kind.InfoFile()), func() (error, bool) { return s.wait(0) })
	if err != nil {
		t.Fatal(err)
	}
	s.Info = info
	s.Conn = Dial(t, s.SocketPath())
	return s
}

// SocketPath is the path of the server's socket.
func (s *Server) SocketPath() string { return filepath.Join(s.Dir, s.Kind.Socket()) }

// InfoPath is the path of the server's server-info file.
func (s *Server) InfoPath() string { return filepath.Join(s.Dir, s.Kind.InfoFile()) }

// Cancel cancels the server's context, which asks it to stop, and returns
// at once; Wait then tells how it ended.
func (s *Server) Cancel() { s.cancel() }

// Stop cancels the server's context and returns what Start returned; the
// test fails if Start does not return within Timeout.
func (s *Server) Stop(t testing.TB) error {
	t.Helper()
	s.cancel()
	return s.Wait(t)
}

// Wait returns what Start returned once it has returned on its own (after a
// panic, say); the test fails if that takes more than Timeout.
func (s *Server) Wait(t testing.TB) error {
	t.Helper()
	err, ok := s.wait(Timeout)
	if !ok {
		t.Fatalf("server did not stop within %v", Timeout)
	}
	return err
}

// Running reports whether Start has not returned yet.
func (s *Server) Running() bool {
	_, ended := s.wait(0)
	return !ended
}

func (s *Server) wait(d time.Duration) (error, bool) {
	if s.ended {
		return s.err, true
	}
	if d <= 0 {
		select {
		case s.err = <-s.done:
			s.ended = true
			return s.err, true
		default:
			return nil, false
		}
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case s.err = <-s.done:
		s.ended = true
		return s.err, true
	case <-timer.C:
		return nil, false
	}
}

// WaitForFile polls for a complete server-info file at path for at most
// Timeout, giving up early when exited reports that the server has exited.
func WaitForFile(path string, exited func() (error, bool)) (serverinfo.ServerInfo, error) {
	deadline := time.Now().Add(Timeout)
	for {
		info, err := serverinfo.Read(path)
		if err == nil {
			return info, nil
		}
		if err, ok := exited(); ok {
			return serverinfo.ServerInfo{}, fmt.Errorf("server exited before writing its server-info file: %v", err)
		}
		if time.Now().After(deadline) {
			return serverinfo.ServerInfo{}, fmt.Errorf("server-info file did not appear within %v: %w", Timeout, err)
		}
		timer := time.NewTimer(poll)
		<-timer.C
	}
}

// AssertRemoved fails the test if any of paths still exists.
func AssertRemoved(t testing.TB, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists after the server stopped (stat: %v)", p, err)
		}
	}
}

// AssertInfoFile fails the test unless the server-info file at path holds
// exactly what serverinfo.Write writes for serverinfo.Default(kind,
// serverinfo.SDKCompatVersion).
func AssertInfoFile(t testing.TB, path string, kind serverinfo.Kind) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := serverinfo.Encode(serverinfo.Default(kind, serverinfo.SDKCompatVersion))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("server-info file\n got %s\nwant %s", got, want)
	}
}

// WaitRemoved polls, for at most Timeout, until path no longer exists.
func WaitRemoved(t testing.TB, path string) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for {
		if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists after %v", path, Timeout)
		}
		timer := time.NewTimer(poll)
		<-timer.C
	}
}
