// Package udstest serves gRPC servers of user-defined functions on unix
// sockets for tests, as a UDF container does: on the socket of their kind in
// a directory, with the server-info file written once they listen.
package udstest

import (
	"net"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"

	"github.com/sluiceflow/sluice/internal/serverinfo"
)

// Serve listens on the socket of kind in dir, serves the services register
// adds to a new gRPC server until the test ends, and writes the server-info
// file of kind.
func Serve(t testing.TB, dir string, kind serverinfo.Kind, register func(*grpc.Server)) {
	t.Helper()
	lis, err := net.Listen("unix", filepath.Join(dir, kind.Socket()))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	register(srv)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	if err := serverinfo.Write(filepath.Join(dir, kind.InfoFile()), serverinfo.Default(kind, "test")); err != nil {
		t.Fatal(err)
	}
}
