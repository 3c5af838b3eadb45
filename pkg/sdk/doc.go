// Package sdk is sluice's Go SDK for writing user-defined map, sink, source and
// source-transformer servers that speak Numaflow's gRPC protocol.
package sdk
