package serverinfo

import (
	"fmt"
	"strconv"
	"strings"
)

// semver is a parsed semantic version (https://semver.org). Build metadata
// is accepted and ignored, as it does not affect precedence.
type semver struct {
	core [3]uint64 // major, minor, patch
	pre  []string  // pre-release identifiers; nil for a release
}

// parseSemver parses "MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]", with an
// optional leading "v".
func parseSemver(s string) (semver, error) {
	var v semver
	rest := strings.TrimPrefix(s, "v")
	if i := strings.IndexByte(rest, '+'); i >= 0 {
		if !validIdentifiers(rest[i+1:], false) {
			return v, fmt.Errorf("invalid version %q: bad build metadata", s)
		}
		rest = rest[:i]
	}
	if i := strings.IndexByte(rest, '-'); i >= 0 {
		pre := rest[i+1:]
		if !validIdentifiers(pre, true) {
			return v, fmt.Errorf("invalid version %q: bad pre-release", s)
		}
		v.pre = strings.Split(pre, ".")
		rest = rest[:i]
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return v, fmt.Errorf("invalid version %q: want MAJOR.MINOR.PATCH", s)
	}
	for i, p := range parts {
		if !isNumeric(p) || (len(p) > 1 && p[0] == '0') {
			return v, fmt.Errorf("invalid version %q: bad number %q", s, p)
		}
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return v, fmt.Errorf("invalid version %q: %w", s, err)
		}
		v.core[i] = n
	}
	return v, nil
}

// validIdentifiers checks a dot-separated list of non-empty [0-9A-Za-z-]
// identifiers; for pre-releases, numeric identifiers must not have leading
// zeros.
func validIdentifiers(s string, pre bool) bool {
	for _, id := range strings.Split(s, ".") {
		if id == "" {
			return false
		}
		for i := 0; i < len(id); i++ {
			c := id[i]
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-') {
				return false
			}
		}
		if pre && isNumeric(id) && len(id) > 1 && id[0] == '0' {
			return false
		}
	}
	return true
}

func isNumeric(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func compareCore(a, b semver) int {
	for i := range a.core {
		switch {
		case a.core[i] < b.core[i]:
			return -1
		case a.core[i] > b.core[i]:
			return 1
		}
	}
	return 0
}

// compare orders versions by semver precedence: -1, 0 or 1.
func (a semver) compare(b semver) int {
	if c := compareCore(a, b); c != 0 {
		return c
	}
	// A release ranks above any of its pre-releases.
	switch {
	case a.pre == nil && b.pre == nil:
		return 0
	case a.pre == nil:
		return 1
	case b.pre == nil:
		return -1
	}
	for i := 0; i < len(a.pre) && i < len(b.pre); i++ {
		if c := compareIdentifier(a.pre[i], b.pre[i]); c != 0 {
			return c
		}
	}
	switch {
	case len(a.pre) < len(b.pre):
		return -1
	case len(a.pre) > len(b.pre):
		return 1
	}
	return 0
}

// compareIdentifier orders pre-release identifiers: numeric ones
// numerically and below alphanumeric ones, alphanumeric ones in ASCII order.
func compareIdentifier(a, b string) int {
	an, bn := isNumeric(a), isNumeric(b)
	switch {
	case an && bn:
		if len(a) != len(b) { // no leading zeros, so longer is larger
			if len(a) < len(b) {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	case an:
		return -1
	case bn:
		return 1
	}
	return strings.Compare(a, b)
}

// stableMarker is the pre-release Numaflow appends to a minimum version to
// mean "this release, final": "1.4.0-z" asks for 1.4.0 or later and excludes
// 1.4.0's own pre-releases ("z" sorts after the usual rc/alpha/beta tags).
const stableMarker = "z"

// VersionSatisfies reports whether version meets the minimum version minimum,
// following the rules Numaflow applies to minimum_numaflow_version:
//
//   - A minimum without pre-release ("1.4.0") accepts releases at or above
//     it, and no pre-release at all.
//   - A minimum with pre-release accepts any version, pre-release or not,
//     whose MAJOR.MINOR.PATCH is above the minimum's ("1.5.0-rc1" satisfies
//     "1.4.0-z"). With the same MAJOR.MINOR.PATCH:
//   - "X.Y.Z-z" accepts only the release X.Y.Z itself (its pre-releases,
//     however named, are below it);
//   - any other pre-release minimum accepts versions at or above it by
//     semver precedence ("1.4.0-rc2" satisfies "1.4.0-rc1").
//
// Both strings may carry a leading "v" and build metadata (ignored).
func VersionSatisfies(version, minimum string) (bool, error) {
	v, err := parseSemver(version)
	if err != nil {
		return false, err
	}
	m, err := parseSemver(minimum)
	if err != nil {
		return false, fmt.Errorf("minimum version: %w", err)
	}
	if m.pre == nil {
		return v.pre == nil && v.compare(m) >= 0, nil
	}
	if c := compareCore(v, m); c != 0 {
		return c > 0, nil
	}
	if len(m.pre) == 1 && m.pre[0] == stableMarker {
		return v.pre == nil, nil
	}
	return v.compare(m) >= 0, nil
}

// HumanReadableVersion turns a minimum version as written in a server-info
// file into the release it denotes: "1.4.0-z" becomes "1.4.0"; anything else
// is returned as is.
func HumanReadableVersion(minimum string) string {
	return strings.TrimSuffix(minimum, "-"+stableMarker)
}
