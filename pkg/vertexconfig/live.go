package vertexconfig

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// LiveChange reports whether next differs from running only in what a running
// replica can take on: the settings of its rateLimit blocks that
// [RateLimitFields] marks live, and Kubernetes-only fields, which sluice
// ignores. Otherwise it returns an error that matches [ratelimit.ErrNotLive]
// and names the first field that differs by its path, such as
// "spec.limits.rateLimit.store.redisStore.url changed: needs a restart".
func LiveChange(running, next *config.File) error {
	if running.Kind != next.Kind {
		return fmt.Errorf("kind changed from %s to %s: %w", running.Kind, next.Kind, ratelimit.ErrNotLive)
	}
	var a, b reflect.Value
	if running.MonoVertex != nil {
		a, b = reflect.ValueOf(running.MonoVertex).Elem(), reflect.ValueOf(next.MonoVertex).Elem()
	} else {
		a, b = reflect.ValueOf(running.Pipeline).Elem(), reflect.ValueOf(next.Pipeline).Elem()
	}
	if path, how := firstDiff("", a, b); path != "" {
		return fmt.Errorf("%s %s: %w", path, how, ratelimit.ErrNotLive)
	}
	return nil
}

var (
	rateLimitType = reflect.TypeFor[config.RateLimit]()
	k8sType       = reflect.TypeFor[config.K8s]()
)

// liveRateLimit are the YAML names of the settings of a rateLimit block
// that can change while a replica runs.
var liveRateLimit = liveYAML()

// ownLimiter are the live settings of a rateLimit block that make a limiter
// of their own (they set no field of the limiter's config): their values
// change live, their presence does not.
var ownLimiter = func() []string {
	var names []string
	for _, f := range RateLimitFields {
		if f.Live && f.Go == "" && !strings.Contains(f.YAML, ".") {
			names = append(names, f.YAML)
		}
	}
	return names
}()

// firstDiff returns the path of the first field in which a and b differ,
// in field order, and how, or "". The live settings of a rateLimit block
// are skipped.
func firstDiff(path string, a, b reflect.Value) (string, string) {
	switch a.Kind() {
	case reflect.Pointer:
		switch {
		case a.IsNil() && b.IsNil():
			return "", ""
		case a.IsNil():
			return path, "was added"
		case b.IsNil():
			return path, "was removed"
		}
		return firstDiff(path, a.Elem(), b.Elem())
	case reflect.Struct:
		if a.Type() == k8sType {
			return "", ""
		}
		if !exported(a.Type()) {
			if !reflect.DeepEqual(a.Interface(), b.Interface()) {
				return path, "changed"
			}
			return "", ""
		}
		isRL := a.Type() == rateLimitType
		for i := range a.NumField() {
			sf := a.Type().Field(i)
			name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
			if !sf.IsExported() || name == "-" {
				continue
			}
			if isRL && slices.Contains(liveRateLimit, name) {
				if slices.Contains(ownLimiter, name) && a.Field(i).IsNil() != b.Field(i).IsNil() {
					// A limiter of its own (bytes) changes live, but is
					// not added or removed.
					return firstDiff(path+"."+name, a.Field(i), b.Field(i))
				}
				continue
			}
			p := path
			if name != "" { // an inlined struct adds no name
				p = name
				if path != "" {
					p = path + "." + name
				}
			}
			if d, how := firstDiff(p, a.Field(i), b.Field(i)); d != "" {
				return d, how
			}
		}
		return "", ""
	case reflect.Slice:
		if a.Len() != b.Len() {
			return path, "changed"
		}
		for i := range a.Len() {
			if d, how := firstDiff(fmt.Sprintf("%s[%d]", path, i), a.Index(i), b.Index(i)); d != "" {
				return d, how
			}
		}
		return "", ""
	}
	if !reflect.DeepEqual(a.Interface(), b.Interface()) {
		return path, "changed"
	}
	return "", ""
}

// exported reports whether every field of struct type t is exported: a type
// such as Duration or Unsupported is compared whole.
func exported(t reflect.Type) bool {
	for i := range t.NumField() {
		if !t.Field(i).IsExported() {
			return false
		}
	}
	return t.NumField() > 0
}
