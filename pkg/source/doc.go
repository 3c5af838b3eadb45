// Package source holds the built-in sources (generator, http), the user-defined
// source over gRPC, and the adapter that reads a vertex's input from the ISB.
package source
