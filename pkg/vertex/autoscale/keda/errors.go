package keda

import "errors"

var (
	// ErrUnreachable is the error of a vertex none of whose replicas
	// answered: IsActive returns it, GetMetrics holds the last count.
	ErrUnreachable = errors.New("keda: replicas unreachable")
	// ErrVertex is the error of a scalerMetadata that names no vertex the
	// scaler serves.
	ErrVertex = errors.New("keda: unknown vertex")
)
