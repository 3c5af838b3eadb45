// Package sqsclient is what the SQS source and sink share: an AWS SDK
// client of one queue, its URL found by name (GetQueueUrl) when first
// needed, and errors that name the YAML field at fault.
//
// # Credentials
//
// The client takes its credentials from the AWS SDK's default chain:
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), a
// profile (AWS_PROFILE, ~/.aws), web identity (AWS_WEB_IDENTITY_TOKEN_FILE,
// as on EKS), the container or instance role. With an assume role, it
// assumes that role (STS AssumeRole) with those credentials. The endpoint is
// the endpoint URL when one is given, else the chain's (AWS_ENDPOINT_URL_SQS,
// AWS_ENDPOINT_URL), else the region's.
//
// # Failures
//
// A call that fails because of the queue, the credentials or the network
// puts the queue in backoff (100ms doubling to 10s, jittered); [Queue.Failed]
// returns the failure's error the first time it is seen and nil while the
// same failure repeats, so that a vertex reports a lasting cause once, and
// [Queue.Wait] waits out the backoff. The first call that succeeds ends it.
package sqsclient

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	ststypes "github.com/aws/aws-sdk-go-v2/service/sts/types"
	"github.com/aws/smithy-go"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/clock"
)

// MaxBatch is the most entries one SQS batch call (ReceiveMessage,
// SendMessageBatch, DeleteMessageBatch) takes.
const MaxBatch = 10

// Backoff bounds of a failing queue.
const (
	MinBackoff = 100 * time.Millisecond
	MaxBackoff = 10 * time.Second
)

// AssumeRole is the role to assume (Numaflow's assumeRole).
type AssumeRole struct {
	RoleARN     string
	SessionName string
	// Duration is the session's (0: STS's default of an hour).
	Duration   time.Duration
	ExternalID string
	Policy     string
	PolicyARNs []string
}

// Config configures a [Queue].
type Config struct {
	// Field is the YAML path of the queue's block (spec.source.sqs), which
	// errors name.
	Field string
	// Region and QueueName are required; OwnerAccount is the queue owner's
	// account ("": the caller's).
	Region       string
	QueueName    string
	OwnerAccount string
	// EndpointURL is the SQS endpoint ("": the chain's or the region's).
	EndpointURL string
	AssumeRole  *AssumeRole
	// Credentials, when set, replaces the default chain (for tests).
	Credentials aws.CredentialsProvider
	Clock       clock.Clock
	Logger      *zap.Logger
}

// Queue is one SQS queue and its client. It is safe for concurrent use.
type Queue struct {
	// API is the SDK client.
	API *sqs.Client
	cfg Config

	mu       sync.Mutex
	url      string
	attempt  int
	until    time.Time // backoff ends
	reported string    // the error last returned by Failed
}

// New makes the client of cfg's queue. It does not call SQS: the queue's
// URL is found on the first call that needs it.
func New(ctx context.Context, cfg Config) (*Queue, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	opts := []func(*awsconfig.LoadOptions) error{awsconfig.WithRegion(cfg.Region)}
	if cfg.Credentials != nil {
		opts = append(opts, awsconfig.WithCredentialsProvider(cfg.Credentials))
	}
	ac, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: loading the AWS configuration: %w", cfg.Field, err)
	}
	if r := cfg.AssumeRole; r != nil {
		client := sts.NewFromConfig(ac)
		ac.Credentials = aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(client, r.RoleARN, func(o *stscreds.AssumeRoleOptions) {
			o.RoleSessionName = r.SessionName
			o.Duration = r.Duration
			if r.ExternalID != "" {
				o.ExternalID = aws.String(r.ExternalID)
			}
			if r.Policy != "" {
				o.Policy = aws.String(r.Policy)
			}
			for _, arn := range r.PolicyARNs {
				o.PolicyARNs = append(o.PolicyARNs, ststypes.PolicyDescriptorType{Arn: aws.String(arn)})
			}
		}))
	}
	q := &Queue{cfg: cfg}
	q.API = sqs.NewFromConfig(ac, func(o *sqs.Options) {
		if cfg.EndpointURL != "" {
			o.BaseEndpoint = aws.String(cfg.EndpointURL)
		}
		// The queue's own backoff spaces out attempts; the SDK's retries of
		// one call stay short.
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = 3
			so.MaxBackoff = time.Second
		})
	})
	return q, nil
}

// URL returns the queue's URL, asking SQS for it (GetQueueUrl) the first
// time.
func (q *Queue) URL(ctx context.Context) (string, error) {
	q.mu.Lock()
	url := q.url
	q.mu.Unlock()
	if url != "" {
		return url, nil
	}
	in := &sqs.GetQueueUrlInput{QueueName: aws.String(q.cfg.QueueName)}
	if q.cfg.OwnerAccount != "" {
		in.QueueOwnerAWSAccountId = aws.String(q.cfg.OwnerAccount)
	}
	out, err := q.API.GetQueueUrl(ctx, in)
	if err != nil {
		return "", err
	}
	url = aws.ToString(out.QueueUrl)
	q.mu.Lock()
	first := q.url == ""
	q.url = url
	q.mu.Unlock()
	if first {
		q.cfg.Logger.Info("sqs queue found", zap.String("queue", q.cfg.QueueName), zap.String("url", url))
	}
	return url, nil
}

// Name is the queue's name.
func (q *Queue) Name() string { return q.cfg.QueueName }

// Failed notes that a call failed with err and puts the queue in backoff.
// It returns err explained (see [Queue.Explain]) when that failure is new,
// and nil while the same failure repeats. A failure of a cancelled ctx is
// not noted and comes back as it is.
func (q *Queue) Failed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return err
	}
	e := q.Explain(err)
	var missing *types.QueueDoesNotExist
	q.mu.Lock()
	defer q.mu.Unlock()
	if errors.As(err, &missing) {
		q.url = "" // it may be made again, with another URL
	}
	d := min(MinBackoff<<min(q.attempt, 10), MaxBackoff)
	d -= time.Duration(rand.Int64N(int64(d/2) + 1))
	q.attempt++
	q.until = q.cfg.Clock.Now().Add(d)
	if e.Error() == q.reported {
		return nil
	}
	q.reported = e.Error()
	return e
}

// Succeeded ends a backoff; the next failure is reported again.
func (q *Queue) Succeeded() {
	q.mu.Lock()
	was := q.reported
	q.attempt, q.until, q.reported = 0, time.Time{}, ""
	q.mu.Unlock()
	if was != "" {
		q.cfg.Logger.Info("sqs queue reachable again", zap.String("field", q.cfg.Field), zap.String("queue", q.cfg.QueueName))
	}
}

// Wait waits until the queue's backoff ends, for at most max, and reports
// whether it has ended (false also when ctx is done).
func (q *Queue) Wait(ctx context.Context, max time.Duration) bool {
	q.mu.Lock()
	until := q.until
	q.mu.Unlock()
	now := q.cfg.Clock.Now()
	if !now.Before(until) {
		return true
	}
	if until.Sub(now) > max {
		clock.Sleep(ctx, q.cfg.Clock, max)
		return false
	}
	return clock.SleepUntil(ctx, q.cfg.Clock, until)
}

// Explain returns err with the YAML field it concerns and what to check.
func (q *Queue) Explain(err error) error {
	c := q.cfg
	var missing *types.QueueDoesNotExist
	var api smithy.APIError
	var netErr net.Error
	switch {
	case errors.As(err, &missing):
		where := "region " + c.Region
		if c.OwnerAccount != "" {
			where += ", account " + c.OwnerAccount
		}
		return fmt.Errorf("%w: %s.queueName (%q): the queue does not exist (%s): %w", ErrQueue, c.Field, c.QueueName, where, err)
	case errors.As(err, &api) && authCodes[api.ErrorCode()]:
		return fmt.Errorf("%w: %s: the AWS credentials were refused for queue %q (%s); they come from the AWS chain (AWS_ACCESS_KEY_ID, AWS_PROFILE, web identity, the pod's role)%s: %w",
			ErrCredentials, c.Field, c.QueueName, api.ErrorCode(), c.roleHint(), err)
	case errors.As(err, &netErr):
		if c.EndpointURL != "" {
			return fmt.Errorf("%w: %s.endpointUrl (%q): cannot reach SQS: %w", ErrUnreachable, c.Field, c.EndpointURL, err)
		}
		return fmt.Errorf("%w: %s.awsRegion (%q): cannot reach SQS: %w", ErrUnreachable, c.Field, c.Region, err)
	}
	return fmt.Errorf("%s: queue %q: %w", c.Field, c.QueueName, err)
}

func (c Config) roleHint() string {
	if c.AssumeRole == nil {
		return ""
	}
	return fmt.Sprintf(", then %s.assumeRole.roleArn (%q)", c.Field, c.AssumeRole.RoleARN)
}

// authCodes are the error codes of refused credentials.
var authCodes = map[string]bool{
	"InvalidClientTokenId": true, "SignatureDoesNotMatch": true, "AccessDenied": true,
	"AccessDeniedException": true, "UnrecognizedClientException": true, "ExpiredToken": true,
	"InvalidSecurity": true, "MissingAuthenticationToken": true, "IncompleteSignature": true,
	"AWS.SimpleQueueService.InvalidClientTokenId": true,
}
