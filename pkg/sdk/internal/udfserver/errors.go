package udfserver

import "errors"

// ErrStarted is returned by Run on a server that has already been started;
// a server runs once.
var ErrStarted = errors.New("sdk: server already started")

// ErrSocketInUse is returned by Run when another server is accepting
// connections on the socket it would listen on.
var ErrSocketInUse = errors.New("sdk: socket is in use by a live server")

// ErrUDFPanic is wrapped by the error Run returns after user code panicked
// and the server shut down because of it.
var ErrUDFPanic = errors.New("sdk: user-defined function panicked")
