package udfserver

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/sdktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConfigDir(t *testing.T) {
	cases := []struct {
		name, option, env, want string
	}{
		{"default", "", "", serverinfo.DefaultDir},
		{"environment", "", "/env/dir", "/env/dir"},
		{"option wins", "/opt/dir", "/env/dir", "/opt/dir"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(EnvSocketDir, c.env)
			if got := (Config{SocketDir: c.option}).Dir(); got != c.want {
				t.Errorf("Dir() = %q, want %q", got, c.want)
			}
		})
	}
}

// run starts a server with no service in dir and returns it running.
func run(t *testing.T, dir string) *sdktest.Server {
	t.Helper()
	return sdktest.Start(t, dir, serverinfo.KindSource, New(serverinfo.KindSource, Config{SocketDir: dir}).Run)
}

// The server-info file appears only once the socket accepts connections.
func TestInfoFileAfterListen(t *testing.T) {
	s := run(t, sdktest.Dir(t))
	conn, err := net.Dial("unix", s.SocketPath())
	if err != nil {
		t.Fatalf("socket not listening when the server-info file appeared: %v", err)
	}
	_ = conn.Close()
	if err := s.Stop(t); err != nil {
		t.Fatal(err)
	}
	sdktest.AssertRemoved(t, s.SocketPath(), s.InfoPath())
}

func TestStaleSocketIsReplaced(t *testing.T) {
	dir := sdktest.Dir(t)
	path := filepath.Join(dir, serverinfo.SourceSocket)
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	lis.(*net.UnixListener).SetUnlinkOnClose(false)
	_ = lis.Close() // leaves the socket file behind, as a killed server does
	if _, err := os.Lstat(path); err != nil {
		t.Fatal(err)
	}
	s := run(t, dir)
	if err := s.Stop(t); err != nil {
		t.Fatal(err)
	}
}

func TestRefusesToRemove(t *testing.T) {
	t.Run("live socket", func(t *testing.T) {
		dir := sdktest.Dir(t)
		lis, err := net.Listen("unix", filepath.Join(dir, serverinfo.SourceSocket))
		if err != nil {
			t.Fatal(err)
		}
		defer lis.Close()
		err = New(serverinfo.KindSource, Config{SocketDir: dir}).Run(t.Context())
		if !errors.Is(err, ErrSocketInUse) {
			t.Fatalf("Run = %v, want ErrSocketInUse", err)
		}
		if _, err := os.Stat(filepath.Join(dir, serverinfo.SourceInfoFile)); err == nil {
			t.Error("server-info file written")
		}
	})
	t.Run("regular file", func(t *testing.T) {
		dir := sdktest.Dir(t)
		path := filepath.Join(dir, serverinfo.SourceSocket)
		if err := os.WriteFile(path, []byte("data"), 0o600); err != nil {
			t.Fatal(err)
		}
		err := New(serverinfo.KindSource, Config{SocketDir: dir}).Run(t.Context())
		if err == nil || !strings.Contains(err.Error(), "not a socket") {
			t.Fatalf("Run = %v", err)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != "data" {
			t.Errorf("file changed: %q, %v", b, err)
		}
	})
	t.Run("path too long", func(t *testing.T) {
		dir := filepath.Join(sdktest.Dir(t), strings.Repeat("d", 120))
		err := New(serverinfo.KindSource, Config{SocketDir: dir}).Run(t.Context())
		if err == nil || !strings.Contains(err.Error(), "more than the 107") {
			t.Fatalf("Run = %v", err)
		}
	})
}

func TestRunsOnce(t *testing.T) {
	dir := sdktest.Dir(t)
	srv := New(serverinfo.KindSource, Config{SocketDir: dir})
	s := sdktest.Start(t, dir, serverinfo.KindSource, srv.Run)
	if err := srv.Run(context.Background()); !errors.Is(err, ErrStarted) {
		t.Fatalf("second Run = %v, want ErrStarted", err)
	}
	if err := s.Stop(t); err != nil {
		t.Fatal(err)
	}
}

func TestReady(t *testing.T) {
	dir := sdktest.Dir(t)
	srv := New(serverinfo.KindSource, Config{SocketDir: dir})
	if srv.Ready() {
		t.Error("ready before Run")
	}
	s := sdktest.Start(t, dir, serverinfo.KindSource, srv.Run)
	if !srv.Ready() {
		t.Error("not ready while serving")
	}
	if err := s.Stop(t); err != nil {
		t.Fatal(err)
	}
	if srv.Ready() {
		t.Error("ready after stop")
	}
}

// SIGTERM stops the server gracefully; Run returns nil.
func TestSignalStops(t *testing.T) {
	dir := sdktest.Dir(t)
	srv := New(serverinfo.KindSource, Config{SocketDir: dir})
	// Start with a context that is never cancelled: only the signal can stop
	// the server.
	s := sdktest.Start(t, dir, serverinfo.KindSource, func(context.Context) error { return srv.Run(context.Background()) })
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := s.Wait(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	sdktest.AssertRemoved(t, s.SocketPath(), s.InfoPath())
}

func TestCallRecoversPanic(t *testing.T) {
	srv := New(serverinfo.KindMap, Config{})
	if err := srv.Call(func() {}); err != nil {
		t.Fatalf("Call = %v", err)
	}
	err := srv.Call(func() { panic(42) })
	if err == nil || err.Error() != "rpc error: code = Internal desc = UDF_EXECUTION_ERROR(map): 42" {
		t.Fatalf("Call = %v", err)
	}
	select {
	case <-srv.panicked:
	default:
		t.Fatal("a panic must trigger the shutdown")
	}
}
