package sqstest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluiceflow/sluice/internal/sqstest"
)

// TestBridge sends, receives, hides and deletes messages through goaws.
func TestBridge(t *testing.T) {
	s := sqstest.Start(t)
	q := s.CreateQueue(t, "bridge", 1)
	c := s.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &q, Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("a"), MessageBody: aws.String("one")}, {Id: aws.String("b"), MessageBody: aws.String("two")}}})
	if err != nil || len(out.Successful) != 2 {
		t.Fatalf("send: %v %+v", err, out)
	}
	if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String("three"),
		MessageAttributes: map[string]types.MessageAttributeValue{"k": {DataType: aws.String("String"), StringValue: aws.String("v")}}}); err != nil {
		t.Fatalf("send one: %v", err)
	}
	got, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &q, MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
		MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
	if err != nil || len(got.Messages) != 3 {
		t.Fatalf("receive: %v %+v", err, got)
	}
	if v := got.Messages[2].MessageAttributes["k"]; aws.ToString(v.StringValue) != "v" {
		t.Fatalf("attributes: %+v", got.Messages[2])
	}
	if _, err := c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &q, ReceiptHandle: got.Messages[0].ReceiptHandle, VisibilityTimeout: 0}); err != nil {
		t.Fatalf("visibility: %v", err)
	}
	del, err := c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &q, Entries: []types.DeleteMessageBatchRequestEntry{
		{Id: aws.String("1"), ReceiptHandle: got.Messages[1].ReceiptHandle}, {Id: aws.String("2"), ReceiptHandle: got.Messages[2].ReceiptHandle}}})
	if err != nil || len(del.Successful) != 2 {
		t.Fatalf("delete: %v %+v", err, del)
	}
	again, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &q, MaxNumberOfMessages: 10, WaitTimeSeconds: 3})
	if err != nil || len(again.Messages) != 1 || aws.ToString(again.Messages[0].Body) != "one" {
		t.Fatalf("receive again: %v %+v", err, again)
	}
	_, err = c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("nope")})
	var e *types.QueueDoesNotExist
	if !errors.As(err, &e) {
		t.Fatalf("missing queue: %v", err)
	}
}
