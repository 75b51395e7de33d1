package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TableAdminAPI is the part of *dynamodb.Client that CreateTable uses.
type TableAdminAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// TTLDescriberAPI is the method CreateTable uses, when the client has it
// (*dynamodb.Client does), to check an existing table's TTL.
type TTLDescriberAPI interface {
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
}

// ErrTTLConflict: the table's TTL is enabled on another attribute than
// TTLAttribute. DynamoDB allows one TTL attribute per table, so the
// limiter's items would never expire.
var ErrTTLConflict = errors.New("fleetbucket: table TTL is enabled on another attribute")

// CreateTable creates a limiter table (on-demand, TTL on TTLAttribute) and
// waits until it is active. An existing table is left as it is, but its TTL
// must be on TTLAttribute: TTL enabled on another attribute is reported
// (ErrTTLConflict) rather than ignored. In AWS the CDK stack creates the
// table; this is for local stacks and tests.
func CreateTable(ctx context.Context, db TableAdminAPI, name string) error {
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            &name,
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(KeyAttribute), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(KeyAttribute), KeyType: types.KeyTypeHash}},
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create table %q: %w", name, err)
	}
	if err := dynamodb.NewTableExistsWaiter(db).Wait(ctx, &dynamodb.DescribeTableInput{TableName: &name}, time.Minute); err != nil {
		return fmt.Errorf("wait for table %q: %w", name, err)
	}
	// Look first: some stores (moto) silently move TTL to a new attribute
	// where DynamoDB refuses with a ValidationException.
	if done, err := ttlEnabled(ctx, db, name); done || err != nil {
		return err
	}
	_, err = db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               &name,
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(TTLAttribute), Enabled: aws.Bool(true)},
	})
	if err == nil {
		return nil
	}
	// DynamoDB refuses to enable TTL twice with a ValidationException, also
	// while a change is in progress: fine only if it is ours.
	if isValidation(err) {
		if done, derr := ttlEnabled(ctx, db, name); done || derr != nil {
			return derr
		}
	}
	return fmt.Errorf("enable TTL on table %q: %w", name, err)
}

// ttlEnabled reports whether the table's TTL is enabled on TTLAttribute,
// and an ErrTTLConflict if it is enabled (or being enabled) on another
// attribute. Without a DescribeTimeToLive method it knows nothing.
func ttlEnabled(ctx context.Context, db TableAdminAPI, name string) (bool, error) {
	d, ok := db.(TTLDescriberAPI)
	if !ok {
		return false, nil
	}
	out, err := d.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &name})
	if err != nil || out.TimeToLiveDescription == nil {
		return false, nil
	}
	desc := out.TimeToLiveDescription
	switch attr := aws.ToString(desc.AttributeName); {
	case desc.TimeToLiveStatus == types.TimeToLiveStatusDisabled || desc.TimeToLiveStatus == types.TimeToLiveStatusDisabling || attr == "":
		return false, nil
	case attr != TTLAttribute:
		return false, fmt.Errorf("%w: table %q has TTL %s on %q, the limiter's items expire by %q: disable it or use another table", ErrTTLConflict, name, desc.TimeToLiveStatus, attr, TTLAttribute)
	}
	return true, nil
}

func isValidation(err error) bool {
	var apiErr interface{ ErrorCode() string }
	return errors.As(err, &apiErr) && apiErr.ErrorCode() == "ValidationException"
}
