// Package config holds the vertex YAML types with Numaflow's field names
// (MonoVertex and Pipeline, limits and rateLimit), their defaults, and the one-time
// validation that names the path and value of every bad field. Packages below it
// only ever receive validated values.
package config
