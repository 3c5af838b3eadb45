// Package podmantest runs podman for tests: it builds sluice's images, and
// those of numaflow-go's examples, once per test process with
// scripts/image.sh, plays Kubernetes YAML with `podman kube play`, reads the
// containers' logs, and removes everything it made.
//
// Podman runs with the flags the project's machines need (VFS storage, runc,
// cgroupfs; $PODMAN_FLAGS replaces them) and a containers.conf of its own
// without default ulimits. A test that calls New is skipped, with one line,
// when podman is not installed or cannot run a container here.
//
// A package that uses it calls Main from its TestMain, which removes the
// images the process built:
//
//	func TestMain(m *testing.M) { os.Exit(podmantest.Main(m)) }
//
// Every podman command is bounded in time.
package podmantest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	commandTimeout = 2 * time.Minute // one podman command
	// buildTimeout bounds scripts/image.sh, which compiles the binaries (a
	// few minutes on 2 cores with a cold Go build cache).
	buildTimeout = 8 * time.Minute
)

// DefaultFlags are podman's global flags on the project's machines: VFS
// storage, runc (crun does not support cgroups in hybrid mode) and cgroupfs.
// The tests add a storage of their own ([Storage]), so that a machine whose
// podman storage was set up with another driver still runs them.
var DefaultFlags = []string{"--storage-driver", "vfs", "--runtime", "runc", "--cgroup-manager", "cgroupfs"}

// Storage returns the graph root and run root of the tests' VFS storage:
// under /var/lib/containers and /run/containers for root, else under the
// user's cache directory and the temporary directory. Podman refuses a
// storage whose database names another driver ("database configuration
// mismatch"), which the machine's default storage does once podman ran
// there without --storage-driver vfs. Images built there stay for the next
// run.
func Storage() (graphRoot, runRoot string) {
	if os.Geteuid() == 0 {
		return "/var/lib/containers/sluice-tests", "/run/containers/sluice-tests"
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	return filepath.Join(cache, "sluice-tests", "containers"), filepath.Join(os.TempDir(), fmt.Sprintf("sluice-tests-run-%d", os.Geteuid()))
}

// Podman runs podman commands.
type Podman struct {
	path  string
	flags []string
	env   []string // CONTAINERS_CONF
	dir   string   // containers.conf, play files, build context
	tag   string   // of the images this process builds

	mu    sync.Mutex
	built map[string]string // target (sluice or an example) → image name
	nfgo  map[string]string // numaflow-go's image name → the ID of the image built
	// engineEnv is set once EngineEnv has written its files.
	engineEnv bool
}

var (
	once   sync.Once
	shared *Podman
	skip   string // why tests that need podman are skipped
)

// New returns the process's Podman, or skips the test when podman is not
// installed or cannot run a container here.
func New(t testing.TB) *Podman {
	t.Helper()
	once.Do(setup)
	if skip != "" {
		t.Skip(skip)
	}
	return shared
}

func setup() {
	path, err := exec.LookPath("podman")
	if err != nil {
		skip = "podman not installed: run make test, which installs it, or apt-get install podman buildah runc"
		return
	}
	dir, err := os.MkdirTemp("", "podmantest-")
	if err != nil {
		skip = "podman: " + err.Error()
		return
	}
	conf := filepath.Join(dir, "containers.conf")
	if err := os.WriteFile(conf, []byte("[containers]\ndefault_ulimits = []\n"), 0o644); err != nil {
		skip = "podman: " + err.Error()
		return
	}
	graphRoot, runRoot := Storage()
	flags := append(slices.Clone(DefaultFlags), "--root", graphRoot, "--runroot", runRoot)
	if f, ok := os.LookupEnv("PODMAN_FLAGS"); ok {
		flags = strings.Fields(f)
	}
	p := &Podman{path: path, flags: flags, env: []string{"CONTAINERS_CONF=" + conf}, dir: dir,
		tag: fmt.Sprintf("podmantest-%d", os.Getpid()), built: map[string]string{}, nfgo: map[string]string{}}
	// A pod of nothing but its infra container proves that podman can run a
	// container here, with the flags and configuration above.
	probe := "podmantest-probe-" + p.tag
	out, err := p.Output(context.Background(), "pod", "create", "--name", probe, "--network", "host")
	if err == nil {
		out, err = p.Output(context.Background(), "pod", "start", probe)
	}
	p.Output(context.Background(), "pod", "rm", "--force", probe)
	if err != nil {
		skip = "podman cannot run a container here: " + firstLine(out, err)
		os.RemoveAll(dir)
		return
	}
	shared = p
}

// EngineEnv is the environment of a process that runs podman without the
// package's flags, as `vertex run --containers podman` does: configuration
// files that say what DefaultFlags say (VFS storage, runc, cgroupfs), the
// tests' storage ([Storage]) and what containers.conf says (no default
// ulimits), in $CONTAINERS_CONF and $CONTAINERS_STORAGE_CONF. With
// $PODMAN_FLAGS set, the storage is podman's default.
func (p *Podman) EngineEnv(t testing.TB) []string {
	t.Helper()
	conf := filepath.Join(p.dir, "engine-containers.conf")
	storage := filepath.Join(p.dir, "engine-storage.conf")
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.engineEnv {
		return []string{"CONTAINERS_CONF=" + conf, "CONTAINERS_STORAGE_CONF=" + storage}
	}
	p.engineEnv = true
	graphRoot, runRoot := Storage()
	if _, ok := os.LookupEnv("PODMAN_FLAGS"); ok {
		graphRoot, runRoot = "/var/lib/containers/storage", "/run/containers/storage"
	}
	for path, text := range map[string]string{
		conf:    "[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = \"runc\"\ncgroup_manager = \"cgroupfs\"\n",
		storage: fmt.Sprintf("[storage]\ndriver = \"vfs\"\nrunroot = %q\ngraphroot = %q\n", runRoot, graphRoot),
	} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return []string{"CONTAINERS_CONF=" + conf, "CONTAINERS_STORAGE_CONF=" + storage}
}

// Main runs the tests, then removes the images this process built and its
// temporary files, and returns the exit code for os.Exit.
func Main(m *testing.M) int {
	code := m.Run()
	if shared != nil {
		shared.cleanup()
	}
	return code
}

func (p *Podman) cleanup() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, name := range p.built {
		// --force: also any container a failed test left behind.
		if out, err := p.Output(context.Background(), "rmi", "--force", name); err != nil {
			fmt.Fprintf(os.Stderr, "podmantest: removing %s: %s\n", name, firstLine(out, err))
		}
	}
	p.built = map[string]string{}
	for name, id := range p.nfgo {
		// By ID: the name may stand for another process's build by now.
		out, err := p.Output(context.Background(), "rmi", "--force", id)
		if err != nil && !strings.Contains(out, "image not known") {
			fmt.Fprintf(os.Stderr, "podmantest: removing %s (%s): %s\n", name, id, firstLine(out, err))
		}
	}
	p.nfgo = map[string]string{}
	os.RemoveAll(p.dir)
}

// Command returns podman with the package's flags and configuration, and args.
func (p *Podman) Command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, p.path, append(append([]string{}, p.flags...), args...)...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// Output runs podman with args for at most two minutes and returns its
// stdout, or, when it fails, its stdout and stderr with the error.
func (p *Podman) Output(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := p.Command(ctx, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String() + stderr.String(), fmt.Errorf("podman %s: %w", strings.Join(args, " "), err)
	}
	return stdout.String(), nil
}

// Run runs podman with args and returns its stdout, failing the test when it
// fails.
func (p *Podman) Run(t testing.TB, args ...string) string {
	t.Helper()
	out, err := p.Output(context.Background(), args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return out
}

// Tag is the tag of the images this process builds; it is also the version
// stamped into their vertex binary.
func (p *Podman) Tag() string { return p.tag }

// Images builds, once per process, the sluice image and those of the SDK
// examples named (sluice-example-<name>), and returns their names by target:
// "sluice", and each example's name.
func (p *Podman) Images(t testing.TB, examples ...string) map[string]string {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	var missing []string
	for _, target := range append([]string{"sluice"}, examples...) {
		if _, ok := p.built[target]; !ok && !contains(missing, target) {
			missing = append(missing, target)
		}
	}
	if len(missing) > 0 {
		p.build(t, missing)
	}
	out := map[string]string{}
	for _, target := range append([]string{"sluice"}, examples...) {
		out[target] = p.built[target]
	}
	return out
}

// build runs scripts/image.sh for the targets, for this host's platform.
func (p *Podman) build(t testing.TB, targets []string) {
	t.Helper()
	start := time.Now()
	out := p.imageScript(t, targets...)
	for _, target := range targets {
		name := "localhost/sluice-example-" + target + ":" + p.tag
		if target == "sluice" {
			name = "localhost/sluice:" + p.tag
		}
		p.built[target] = name
	}
	t.Logf("built in %v: %s", time.Since(start).Round(100*time.Millisecond), out)
}

// imageScript runs scripts/image.sh for the targets, for this host's
// platform, with the images' tag this process's, and returns what it
// printed.
func (p *Podman) imageScript(t testing.TB, targets ...string) string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(root, "scripts", "image.sh")}, targets...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Env = append(cmd.Env, "CONTAINER_TOOL=podman", "PODMAN_FLAGS="+strings.Join(p.flags, " "),
		"TAG="+p.tag, "VERSION="+p.tag, "IMAGE_PREFIX=localhost/", "PLATFORMS=linux/"+runtime.GOARCH,
		"BUILD_DIR="+filepath.Join(p.dir, "build"))
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/image.sh %s: %v\n%s", strings.Join(targets, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// repoRoot is the directory of go.mod above the working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("podmantest: no go.mod above the working directory")
		}
		dir = parent
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// firstLine is the line of a failed command's output that says why: its
// first "Error:" line, else its first line, else the error.
func firstLine(out string, err error) string {
	first := ""
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "Error:") {
			return l
		}
		if first == "" {
			first = l
		}
	}
	if first != "" {
		return first
	}
	return err.Error()
}
