package sqsclient

import "errors"

// Errors of a queue's calls, as [Queue.Explain] wraps them.
var (
	// ErrQueue is a queue that does not exist.
	ErrQueue = errors.New("sqs: no such queue")
	// ErrCredentials is credentials that SQS refused.
	ErrCredentials = errors.New("sqs: credentials refused")
	// ErrUnreachable is an endpoint that cannot be reached.
	ErrUnreachable = errors.New("sqs: endpoint unreachable")
)
