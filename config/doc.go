// Package config holds the vertex YAML types with Numaflow's field names
// (MonoVertex and Pipeline, limits and rateLimit), their defaults, and the
// one-time validation of what the schema says, which names the path, value and
// line of every bad field. It imports no runtime package: the checks that need
// the runtime (a built-in function's arguments, a Kafka client's properties,
// the rate limiter's rules) are the [Check] that package vertexconfig passes
// to [Parse] and [Load] (which take nil for the schema's checks alone), and
// runtime packages only ever receive values it made from a config validated
// whole.
package config
