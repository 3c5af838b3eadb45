package vertexconfig

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/sqsclient"
	"github.com/sluiceflow/sluice/pkg/connectors/sqs"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/vertex"
)

// sqsOpenTimeout bounds loading the AWS configuration of an SQS source or
// sink (no call to SQS is made then).
const sqsOpenTimeout = 30 * time.Second

// sqsSource opens the SQS source at path.
func sqsSource(env vertex.Env, path string, s *config.SQSSource) (isb.Reader, error) {
	cfg := sqs.SourceConfig{
		Queue:                 sqsQueue(env, path, s.AWSRegion, s.QueueName, s.QueueOwnerAWSAccountID, s.EndpointURL, s.AssumeRole),
		VisibilityTimeout:     s.VisibilityTimeout,
		WaitTime:              s.WaitTimeSeconds,
		AttributeNames:        s.AttributeNames,
		MessageAttributeNames: s.MessageAttributeNames,
		ReadTimeout:           env.Limits.ReadTimeout,
		Logger:                env.Log,
	}
	if s.MaxNumberOfMessages != nil {
		cfg.MaxMessages = *s.MaxNumberOfMessages
	}
	ctx, cancel := context.WithTimeout(context.Background(), sqsOpenTimeout)
	defer cancel()
	src, err := sqs.NewSource(ctx, cfg)
	if err != nil {
		return nil, &config.FieldError{Path: path, Err: err}
	}
	env.Log.Info("sqs source", zap.String("queue", s.QueueName), zap.String("region", s.AWSRegion))
	return src, nil
}

// sqsSink opens the SQS sink at path.
func sqsSink(env vertex.Env, path string, s *config.SQSSink) (isb.Writer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), sqsOpenTimeout)
	defer cancel()
	w, err := sqs.NewSink(ctx, sqs.SinkConfig{Logger: env.Log,
		Queue: sqsQueue(env, path, s.AWSRegion, s.QueueName, s.QueueOwnerAWSAccountID, s.EndpointURL, s.AssumeRole)})
	if err != nil {
		return nil, &config.FieldError{Path: path, Err: err}
	}
	env.Log.Info("sqs sink", zap.String("queue", s.QueueName), zap.String("region", s.AWSRegion))
	return w, nil
}

// sqsQueue is the client configuration of a validated SQS block at path.
func sqsQueue(env vertex.Env, path, region, name, owner string, endpoint *string, role *config.AWSAssumeRole) sqsclient.Config {
	c := sqsclient.Config{Field: path, Region: region, QueueName: name, OwnerAccount: owner, Clock: env.Clock, Logger: env.Log}
	if endpoint != nil {
		c.EndpointURL = *endpoint
	}
	if role != nil {
		r := &sqsclient.AssumeRole{RoleARN: role.RoleARN, SessionName: config.DefaultAssumeRoleSession,
			Duration: config.DefaultAssumeRoleDuration * time.Second, PolicyARNs: role.PolicyARNs}
		if role.SessionName != nil && *role.SessionName != "" {
			r.SessionName = *role.SessionName
		}
		if role.DurationSeconds != nil {
			r.Duration = time.Duration(*role.DurationSeconds) * time.Second
		}
		if role.ExternalID != nil {
			r.ExternalID = *role.ExternalID
		}
		if role.Policy != nil {
			r.Policy = *role.Policy
		}
		c.AssumeRole = r
	}
	return c
}
