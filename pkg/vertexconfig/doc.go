// Package vertexconfig turns a parsed config into the runtime's values and
// checks what only the runtime knows. Package config holds the YAML schema
// and imports no runtime package; this package sits between it and the
// packages it configures.
//
// # Loading
//
// [Load], [Parse] and [ParseMonoVertexObject] decode a config and validate
// all of it in one pass: the schema's checks and [Check], the runtime's
// (a built-in function's name and kwargs, a Kafka client's properties, the
// rate limiter's rules, the throttle signals, the names of enumerations).
// Every problem comes back in one [*config.Error], each with its path, value
// and line:
//
//	spec.limits.rateLimit.min (50) > max (10) (line 9)
//
// A program that runs a config loads it here; config.Parse and config.Load
// take [Check] as an argument, or nil for the schema's checks alone.
//
// # Runtime values
//
// [FromMonoVertex] makes the [vertex.Spec] of a MonoVertex and
// [PipelineVertex] that of a pipeline vertex: limits, rate limit and retry
// policy as Go values, and the constructors of the source, functions, sinks
// and rate-limit store, which read secrets and open connections when the
// vertex is built.
//
// [LimiterConfig] and [KeyConfig] make the rate limiter's configs of a
// rateLimit block, [SignalKinds] the throttle signals that cut it.
// [JetStreamConfig] reads a pipeline's spec.isb.jetstream with its secrets.
//
// The config's enumerations are the runtime's types: config holds their YAML
// names, [Check] parses them with the types' UnmarshalText, and [KeyMode],
// [OnFull], [Operator], [Storage], [DeliverFrom] and [OnFailure] return the
// values of a validated config, with the defaults of what it leaves out.
//
// [LiveChange] tells whether a new config differs from a running one only in
// what a replica can take on live.
//
// # Errors
//
// A field that is valid and fails when it is put to use (a secret that
// cannot be read, credentials a server refuses, a TLS certificate that does
// not load) is a [*config.FieldError] with the field's path; this package
// writes every such path, and never a secret's value.
package vertexconfig
