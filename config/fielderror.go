package config

// FieldError is a problem with one field of a valid config that shows only when
// the config is put to use: a secret that cannot be read, credentials a server
// refuses, a TLS certificate that does not load. Path is the field's path in
// the YAML (spec.limits.rateLimit.store.redisStore.redisAuth.password); Err
// says what is wrong and never holds a secret's value.
type FieldError struct {
	Path string
	Err  error
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *FieldError) Unwrap() error { return e.Err }
