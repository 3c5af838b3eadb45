// Package reload applies the live changes of a running replica's config file,
// as `vertex run` does: a change of the rate limits' max, min, rampUpDuration,
// modes or shadow takes effect without a restart.
//
// # Watching
//
// A [Watcher] holds the config a replica runs and the file it came from.
// [Watcher.Run] looks at the file every [Deps.Interval] on [Deps.Clock], and
// at once whenever its force channel receives (`vertex run` feeds it SIGHUP).
// A file whose contents did not change since it was last looked at is left
// alone, unless forced; a file that is missing is no change, unless forced.
//
// # Applying and refusing
//
// A changed file is parsed and validated as at start-up, and compared with the
// running config by [vertexconfig.LiveChange]: when only what can change live
// differs, the new config goes to the apply function Run was given (a vertex's
// UpdateRateLimit, a pipeline's UpdateRateLimits) and becomes the running one.
// Any other change, a config that is not valid, a file that cannot be read or
// an error of apply is refused with one log line naming the file and why, and
// the running config stays.
//
// # Metrics
//
// With [Deps.Registerer] set, sluice_config_reloads_total counts the changes
// looked at, by result (applied or refused), labelled with the vertex and the
// replica.
package reload
