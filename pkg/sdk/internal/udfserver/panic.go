package udfserver

import (
	"context"
	"log"
	"os"
	"runtime/debug"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluiceflow/sluice/internal/serverinfo"
)

// ExecutionErrorPrefix starts the message of the error a panic in user code
// becomes: "UDF_EXECUTION_ERROR(<container>): <panic value>".
const ExecutionErrorPrefix = "UDF_EXECUTION_ERROR"

// panicLabel names the container in a UDF_EXECUTION_ERROR: its container
// type when the runtime set one, else the kind of the server.
func panicLabel(k serverinfo.Kind) string {
	if ct := os.Getenv(serverinfo.EnvContainerType); ct != "" {
		return ct
	}
	return string(k)
}

// Call runs fn, which calls user code. A panic in fn becomes a gRPC error
// with code Internal and message "UDF_EXECUTION_ERROR(<container>): <panic
// value>", and makes Run shut the server down: the runtime sees the error,
// and reconnects to the server once it has been restarted. Call runs fn in
// the calling goroutine; user code running in goroutines it starts itself is
// not covered.
func (s *Server) Call(fn func()) (err error) {
	defer s.Recover(&err)
	fn()
	return nil
}

// Recover is Call for hot paths, without a closure: deferred directly by a
// function that calls user code, it turns a panic there into *err as Call
// does.
//
//	func handle() (err error) {
//		defer srv.Recover(&err)
//		...
func (s *Server) Recover(err *error) {
	if r := recover(); r != nil {
		*err = s.onPanic(r, debug.Stack())
	}
}

func (s *Server) onPanic(r any, stack []byte) error {
	err := status.Errorf(codes.Internal, "%s(%s): %v", ExecutionErrorPrefix, s.label, r)
	log.Printf("sdk: %s server: user-defined function panicked; shutting the server down: %v\n%s", s.kind, r, stack)
	s.panicOnce.Do(func() {
		s.panicErr = err
		close(s.panicked)
	})
	return err
}

// recoverUnary and recoverStream are the safety net for a panic that
// escapes Call on the goroutine of an rpc handler.
func (s *Server) recoverUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer s.Recover(&err)
	return handler(ctx, req)
}

func (s *Server) recoverStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	defer s.Recover(&err)
	return handler(srv, ss)
}
