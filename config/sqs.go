package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// SQSSource reads an AWS SQS queue, at least once (Numaflow's source.sqs).
// Credentials come from the AWS SDK's default chain (AWS_ACCESS_KEY_ID,
// AWS_PROFILE, web identity, the pod's role) and, with AssumeRole, the role
// assumed with them.
type SQSSource struct {
	AWSRegion              string `yaml:"awsRegion"`
	QueueName              string `yaml:"queueName"`
	QueueOwnerAWSAccountID string `yaml:"queueOwnerAWSAccountID"`
	// VisibilityTimeout (seconds, 0 to 43200) is how long a message
	// received stays hidden from other receives; unset, the queue's own.
	VisibilityTimeout *int32 `yaml:"visibilityTimeout"`
	// MaxNumberOfMessages (1 to 10) is the most messages one receive asks
	// for; unset, 10 (never more than the tokens a read is granted).
	MaxNumberOfMessages *int32 `yaml:"maxNumberOfMessages"`
	// WaitTimeSeconds (0 to 20) bounds a receive's long poll; unset, the
	// read timeout does.
	WaitTimeSeconds *int32 `yaml:"waitTimeSeconds"`
	// EndpointURL replaces the region's endpoint (a VPC endpoint, a local
	// SQS server).
	EndpointURL *string `yaml:"endpointUrl"`
	// AttributeNames are the system attributes a message comes with, as
	// headers (SQSAttributeNames; unset: All).
	AttributeNames []string `yaml:"attributeNames"`
	// MessageAttributeNames are the message attributes a message comes
	// with, as its "sqs" user metadata (unset: All).
	MessageAttributeNames []string       `yaml:"messageAttributeNames"`
	AssumeRole            *AWSAssumeRole `yaml:"assumeRole"`
}

// SQSSink sends messages to an AWS SQS queue (Numaflow's sink.sqs), with
// credentials as for [SQSSource].
type SQSSink struct {
	AWSRegion              string `yaml:"awsRegion"`
	QueueName              string `yaml:"queueName"`
	QueueOwnerAWSAccountID string `yaml:"queueOwnerAWSAccountID"`
	// EndpointURL is sluice's addition, as for the source; unset, the
	// chain's (AWS_ENDPOINT_URL_SQS) or the region's endpoint.
	EndpointURL *string        `yaml:"endpointUrl"`
	AssumeRole  *AWSAssumeRole `yaml:"assumeRole"`
}

// AWSAssumeRole is an AWS STS role to assume (Numaflow's assumeRole).
type AWSAssumeRole struct {
	RoleARN     string  `yaml:"roleArn"`
	SessionName *string `yaml:"sessionName"`
	// DurationSeconds is the session's length, 900 to 43200 (default 3600).
	DurationSeconds *int32   `yaml:"durationSeconds"`
	ExternalID      *string  `yaml:"externalID"`
	Policy          *string  `yaml:"policy"`
	PolicyARNs      []string `yaml:"policyArns"`
}

// Defaults and bounds of the SQS fields, as SQS has them.
const (
	DefaultSQSMaxMessages     = 10
	MaxSQSVisibilityTimeout   = 43200
	MaxSQSWaitTimeSeconds     = 20
	DefaultAssumeRoleDuration = 3600
	MinAssumeRoleDuration     = 900
	MaxAssumeRoleDuration     = 43200
	DefaultAssumeRoleSession  = "sluice-sqs"
	sqsAccountIDLength        = 12
	sqsMaxQueueNameLength     = 80
)

// SQSAttributeNames are the names attributeNames takes: SQS's message
// system attributes.
var SQSAttributeNames = []string{"All", "SenderId", "SentTimestamp", "ApproximateReceiveCount",
	"ApproximateFirstReceiveTimestamp", "SequenceNumber", "MessageDeduplicationId", "MessageGroupId",
	"AWSTraceHeader", "DeadLetterQueueSourceArn"}

func (c *checker) sqsSource(path string, s *SQSSource) {
	c.sqsQueue(path, s.AWSRegion, s.QueueName, s.QueueOwnerAWSAccountID, s.EndpointURL, s.AssumeRole)
	c.int32Range(path+".visibilityTimeout", s.VisibilityTimeout, 0, MaxSQSVisibilityTimeout)
	c.int32Range(path+".maxNumberOfMessages", s.MaxNumberOfMessages, 1, DefaultSQSMaxMessages)
	c.int32Range(path+".waitTimeSeconds", s.WaitTimeSeconds, 0, MaxSQSWaitTimeSeconds)
	for i, a := range s.AttributeNames {
		if !slices.Contains(SQSAttributeNames, a) {
			c.add(fmt.Sprintf("%s.attributeNames[%d]", path, i), "(%q) is not a message system attribute: use one of %s", a, strings.Join(SQSAttributeNames, ", "))
		}
	}
	for i, a := range s.MessageAttributeNames {
		if strings.TrimSpace(a) == "" {
			c.add(fmt.Sprintf("%s.messageAttributeNames[%d]", path, i), "must not be empty")
		}
	}
}

func (c *checker) sqsSink(path string, s *SQSSink) {
	c.sqsQueue(path, s.AWSRegion, s.QueueName, s.QueueOwnerAWSAccountID, s.EndpointURL, s.AssumeRole)
}

func (c *checker) sqsQueue(path, region, name, owner string, endpoint *string, role *AWSAssumeRole) {
	if strings.TrimSpace(region) == "" {
		c.required(path + ".awsRegion")
	}
	switch {
	case name == "":
		c.required(path + ".queueName")
	case len(name) > sqsMaxQueueNameLength || strings.ContainsFunc(strings.TrimSuffix(name, ".fifo"), func(r rune) bool {
		return !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}):
		c.add(path+".queueName", "(%q) is not a queue name: up to %d letters, digits, - and _ (a FIFO queue's ends in .fifo)", name, sqsMaxQueueNameLength)
	}
	if owner != "" && (len(owner) != sqsAccountIDLength || strings.ContainsFunc(owner, func(r rune) bool { return r < '0' || r > '9' })) {
		c.add(path+".queueOwnerAWSAccountID", "(%q) is not an AWS account ID: %d digits", owner, sqsAccountIDLength)
	}
	if endpoint != nil {
		u, err := url.Parse(*endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			c.add(path+".endpointUrl", "(%q) is not an http:// or https:// URL", *endpoint)
		} else {
			c.urlPort(path+".endpointUrl", *endpoint, u)
		}
	}
	if role != nil {
		if !strings.HasPrefix(role.RoleARN, "arn:") {
			c.add(path+".assumeRole.roleArn", "(%q) is not a role ARN (arn:aws:iam::ACCOUNT:role/NAME)", role.RoleARN)
		}
		c.int32Range(path+".assumeRole.durationSeconds", role.DurationSeconds, MinAssumeRoleDuration, MaxAssumeRoleDuration)
	}
}

// int32Range checks an optional integer within [lo, hi].
func (c *checker) int32Range(path string, v *int32, lo, hi int32) {
	if v != nil && (*v < lo || *v > hi) {
		c.add(path, "(%d) must be from %d to %d", *v, lo, hi)
	}
}
