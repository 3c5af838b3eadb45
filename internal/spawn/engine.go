package spawn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/sluiceflow/sluice/config"
)

// Engines are the container engines [FindEngine] looks for, in order.
var Engines = []string{"podman", "docker"}

// engineTimeout bounds each command of the engine but `run` (an image
// inspected or pulled, a container removed).
const engineTimeout = 5 * time.Minute

// Engine is a container engine, podman or docker, that runs the user-defined
// containers that have an image and no command: each as `ENGINE run`, with
// host networking, its vertex replica's socket directory mounted at
// /var/run/numaflow and the side inputs' directory at
// /var/numaflow/side-inputs. The engine's own configuration applies (for
// podman: containers.conf and storage.conf, or $CONTAINERS_CONF and
// $CONTAINERS_STORAGE_CONF).
type Engine struct {
	// Name is podman or docker.
	Name string
	// Path is the engine's program.
	Path string
}

// ErrNoEngine is matched by the error of [FindEngine] when neither engine
// can run containers here.
var ErrNoEngine = errors.New("no container engine")

// FindEngine returns the engine called name (podman or docker), checking
// that it can run containers here; with name "", the first of [Engines] that
// can; with name "none", nil.
func FindEngine(ctx context.Context, name string) (*Engine, error) {
	switch name {
	case "none":
		return nil, nil
	case "":
		var why []string
		for _, n := range Engines {
			e, err := FindEngine(ctx, n)
			if err == nil {
				return e, nil
			}
			why = append(why, err.Error())
		}
		return nil, fmt.Errorf("%w: %s", ErrNoEngine, strings.Join(why, "; "))
	case "podman", "docker":
	default:
		return nil, fmt.Errorf("container engine %q: want podman, docker or none", name)
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return nil, fmt.Errorf("%s is not installed", name)
	}
	e := &Engine{Name: name, Path: path}
	// `version` asks docker's daemon too, which may not be running.
	if out, err := e.output(ctx, "version"); err != nil {
		return nil, fmt.Errorf("%s cannot run containers here: %s", name, firstLineOf([]byte(out)))
	}
	return e, nil
}

// output runs the engine with args for at most engineTimeout and returns
// what it printed.
func (e *Engine) output(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, e.Path, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	return out.String(), err
}

// Pull policies, as Kubernetes' imagePullPolicy.
const (
	PullAlways       = "Always"
	PullIfNotPresent = "IfNotPresent"
	PullNever        = "Never"
)

// pullPolicy is policy, or Kubernetes' default for image: Always for the
// tag latest or none, else IfNotPresent.
func pullPolicy(policy, image string) string {
	if policy != "" {
		return policy
	}
	name := image[strings.LastIndex(image, "/")+1:]
	if i := strings.LastIndex(name, ":"); i < 0 || name[i+1:] == "latest" {
		if !strings.Contains(name, "@") {
			return PullAlways
		}
	}
	return PullIfNotPresent
}

// ImageError is the error for an image the engine cannot have.
type ImageError struct {
	Image, Policy string
	Err           error
}

func (e *ImageError) Error() string {
	return fmt.Sprintf("image %s (imagePullPolicy %s): %v", e.Image, e.Policy, e.Err)
}

func (e *ImageError) Unwrap() error { return e.Err }

// ensure makes image present as policy says: Never, present already;
// IfNotPresent, present or pulled; Always, pulled, or present when the pull
// fails (warned is called with why). The error is an [*ImageError].
func (e *Engine) ensure(ctx context.Context, image, policy string, warned func(error)) error {
	policy = pullPolicy(policy, image)
	_, err := e.output(ctx, "image", "inspect", "--format", "{{.Id}}", image)
	present := err == nil
	if present && policy != PullAlways {
		return nil
	}
	if policy == PullNever {
		return &ImageError{image, policy, fmt.Errorf("not present in %s's images, and the policy forbids a pull", e.Name)}
	}
	out, err := e.output(ctx, "pull", image)
	switch {
	case err == nil:
		return nil
	case present:
		warned(fmt.Errorf("pulling %s failed (%s): using the image %s has", image, firstLineOf([]byte(out)), e.Name))
		return nil
	}
	return &ImageError{image, policy, fmt.Errorf("not present in %s's images, and `%s pull` failed: %s", e.Name, e.Name, firstLineOf([]byte(out)))}
}

// ownerLabel labels each container with the pid of the process that runs
// it, so that those of a process that is gone (killed: its containers
// outlive it) are removed ([Engine.removeOrphans]).
const ownerLabel = "io.sluiceflow.pid"

// removeOrphans removes the containers of processes that are gone.
func (e *Engine) removeOrphans(ctx context.Context) {
	out, err := e.output(ctx, "ps", "--all", "--filter", "label="+ownerLabel, "--format", "{{.Names}} {{index .Labels \""+ownerLabel+"\"}}")
	if err != nil {
		return
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, pid, ok := strings.Cut(line, " ")
		n, err := strconv.Atoi(pid)
		if ok && err == nil && n > 0 && !alive(n) {
			e.remove(ctx, name)
		}
	}
}

// remove removes the container called name, if there is one.
func (e *Engine) remove(ctx context.Context, name string) {
	e.output(ctx, "rm", "--force", name)
}

// runArgs are the arguments of `ENGINE run` for the container of spec
// called name, mounting mounts, with env (NAME=value) and the container's
// own env, args and resource limits.
func (e *Engine) runArgs(name string, c container, mounts []mount, env []string) []string {
	a := []string{"run", "--rm", "--name", name, "--network", "host", "--pull", "never", "--label", "io.sluiceflow.role=" + c.role,
		"--label", ownerLabel + "=" + strconv.Itoa(os.Getpid())}
	for _, m := range mounts {
		a = append(a, "--volume", m.Source+":"+m.Target)
	}
	for _, kv := range env {
		a = append(a, "--env", kv)
	}
	for _, v := range c.spec.Env {
		a = append(a, "--env", v.Name+"="+v.Value)
	}
	if cpu := c.spec.Resources.Limits["cpu"]; cpu != "" {
		a = append(a, "--cpus", cpus(cpu))
	}
	if mem := c.spec.Resources.Limits["memory"]; mem != "" {
		a = append(a, "--memory", memoryBytes(mem))
	}
	a = append(a, c.spec.Image)
	return append(a, c.spec.Args...)
}

// cpus is the --cpus of a CPU quantity (config checked it).
func cpus(q string) string {
	v, _ := config.ParseQuantity(q)
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// memoryBytes is the --memory of a memory quantity, in bytes.
func memoryBytes(q string) string {
	v, _ := config.ParseQuantity(q)
	return strconv.FormatInt(int64(v), 10)
}
