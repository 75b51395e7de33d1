package emulator

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// PrefixEnv names the variable that switches the suites and the demo from
// the local stack to an endpoint the user brings (DynamoDB Local, another
// emulator, or an AWS account): every table and queue a run creates is
// named with the prefix and deleted at the end. The endpoints, region and
// credentials are then the AWS SDK's own environment, read as it is.
const PrefixEnv = "FLEETBUCKET_TABLE_PREFIX"

// A prefix is part of queue names (at most 80 characters of [A-Za-z0-9_-]),
// so it stays short and within that set.
var validPrefix = regexp.MustCompile(`^[A-Za-z0-9_-]{1,24}$`)

// runTag tells this process's resources from those of other runs sharing
// the prefix (two CI jobs, or a run still cleaning up), so a sweep deletes
// only its own.
var runTag = fmt.Sprintf("%06x", rand.Uint32()&0xffffff)

// ErrNotConfigured says neither the local stack nor a brought endpoint is
// configured: the one reason a test may skip rather than fail.
var ErrNotConfigured = errors.New(`local stack not configured: run eval "$(scripts/localstack.sh start)" first, or use scripts/test.sh` +
	" (or set " + PrefixEnv + " to run against an endpoint of your own; see docs/operations.md)")

// Brought reports whether the run uses an endpoint the user brings
// (PrefixEnv is set) instead of the local stack.
func Brought() bool { return os.Getenv(PrefixEnv) != "" }

// Prefix is what this process puts before every table and queue name: the
// user's prefix and a run tag, or "" on the local stack.
func Prefix() string {
	if !Brought() {
		return ""
	}
	return os.Getenv(PrefixEnv) + runTag + "-"
}

// Name is a fresh resource name: Prefix, base and a random suffix, cut to
// at most max characters (80 for a queue) at the expense of base.
func Name(base string, max int) string {
	base = unsafeChars.ReplaceAllString(base, "-")
	suffix := fmt.Sprintf("-%08x", rand.Uint32())
	if room := max - len(Prefix()) - len(suffix); len(base) > room {
		base = base[:room]
	}
	return Prefix() + base + suffix
}

// endpoint is where the AWS SDK sends a service's calls: its
// AWS_ENDPOINT_URL_<SERVICE>, else AWS_ENDPOINT_URL, else "" (AWS itself).
func endpoint(service string) string {
	if e := os.Getenv("AWS_ENDPOINT_URL_" + service); e != "" {
		return e
	}
	return os.Getenv("AWS_ENDPOINT_URL")
}

// loopback reports whether an endpoint URL is on this machine.
func loopback(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil || u.Hostname() == "" {
		return false
	}
	if u.Hostname() == "localhost" {
		return true
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}

// checkEnv says what stops a run: no stack configured (ErrNotConfigured),
// an endpoint off this machine without a prefix, or a bad prefix.
func checkEnv() error {
	services := []string{"DYNAMODB", "SQS", "SECRETS_MANAGER"}
	if Brought() {
		if p := os.Getenv(PrefixEnv); !validPrefix.MatchString(p) {
			return fmt.Errorf("%s=%q: want 1 to 24 of A-Z a-z 0-9 _ - (it starts every table and queue name)", PrefixEnv, p)
		}
		if os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
			return fmt.Errorf("%s is set but AWS_REGION is not: set the region of the endpoint you bring", PrefixEnv)
		}
		return nil
	}
	if os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "" || os.Getenv("AWS_ENDPOINT_URL_SQS") == "" {
		return ErrNotConfigured
	}
	for _, s := range services {
		if e := endpoint(s); e != "" && !loopback(e) {
			return fmt.Errorf("AWS_ENDPOINT_URL_%s=%s is not on this machine: the tests create and delete tables and queues, so they "+
				"run there only with %s set (every name starts with it, and what they create is deleted at the end)", s, e, PrefixEnv)
		}
	}
	return nil
}

// allLoopback reports whether DynamoDB and SQS are both on this machine.
func allLoopback() bool { return loopback(endpoint("DYNAMODB")) && loopback(endpoint("SQS")) }

// Load returns the AWS config of the run, for programs (the demo, the
// benchmarks' tools) as Config is for tests. On the local stack it uses
// moto's region and dummy credentials; on a brought endpoint the SDK's
// environment, with dummy credentials only when both endpoints are on
// this machine and none are given (DynamoDB Local takes any).
func Load(ctx context.Context) (aws.Config, error) {
	if err := checkEnv(); err != nil {
		return aws.Config{}, err
	}
	var opts []func(*config.LoadOptions) error
	dummy := credentials.NewStaticCredentialsProvider("test", "test", "")
	switch {
	case !Brought():
		opts = append(opts, config.WithRegion("us-east-1"), config.WithCredentialsProvider(dummy))
	case allLoopback() && os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_PROFILE") == "":
		opts = append(opts, config.WithCredentialsProvider(dummy))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS config: %w", err)
	}
	cfg.Logger = QuietCancelled(cfg.Logger)
	return cfg, nil
}

// Sweep deletes every table and queue whose name starts with Prefix: what
// this process created and did not delete (a test that leaked one, a run
// cut short). It does nothing on the local stack, and returns the names it
// deleted.
func Sweep(ctx context.Context, db *dynamodb.Client, q *sqs.Client) ([]string, error) {
	prefix := Prefix()
	if prefix == "" {
		return nil, nil
	}
	var deleted []string
	var errs []error
	p := dynamodb.NewListTablesPaginator(db, &dynamodb.ListTablesInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return deleted, fmt.Errorf("list tables: %w", err)
		}
		for _, name := range page.TableNames {
			if !strings.HasPrefix(name, prefix) {
				continue
			}
			if _, err := db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: &name}); err != nil {
				errs = append(errs, fmt.Errorf("delete table %s: %w", name, err))
				continue
			}
			deleted = append(deleted, name)
		}
	}
	qp := sqs.NewListQueuesPaginator(q, &sqs.ListQueuesInput{QueueNamePrefix: &prefix})
	for qp.HasMorePages() {
		page, err := qp.NextPage(ctx)
		if err != nil {
			return deleted, errors.Join(append(errs, fmt.Errorf("list queues: %w", err))...)
		}
		for _, u := range page.QueueUrls {
			if _, err := q.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: &u}); err != nil {
				errs = append(errs, fmt.Errorf("delete queue %s: %w", u, err))
				continue
			}
			deleted = append(deleted, u)
		}
	}
	return deleted, errors.Join(errs...)
}

// Main runs a package's tests, for its TestMain, and then, on a brought
// endpoint, sweeps what the run left under Prefix (a test that leaked a
// table, or created one without NewTable), so an AWS account is left as it
// was. A sweep that fails fails the run.
func Main(m *testing.M) int {
	code := m.Run()
	if !Brought() {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg, err := Load(ctx)
	if err == nil {
		var deleted []string
		deleted, err = Sweep(ctx, dynamodb.NewFromConfig(cfg, ForEmulator), sqs.NewFromConfig(cfg))
		if len(deleted) > 0 {
			fmt.Fprintf(os.Stderr, "emulator: deleted %d tables and queues the tests left under %s: %s\n",
				len(deleted), Prefix(), strings.Join(deleted, ", "))
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "emulator: clean-up of %s: %v (delete what is left under that prefix by hand)\n", Prefix(), err)
		code = max(code, 1)
	}
	return code
}

// BroughtEnv is this process's environment pointed at a brought endpoint:
// DynamoDB at dynamo, SQS and Secrets Manager at sqsURL, with prefix, for a
// run in another process that must not see the local stack.
func BroughtEnv(dynamo, sqsURL, prefix string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, PrefixEnv+"=") {
			env = append(env, kv)
		}
	}
	return append(env, "AWS_ENDPOINT_URL_DYNAMODB="+dynamo, "AWS_ENDPOINT_URL_SQS="+sqsURL,
		"AWS_ENDPOINT_URL_SECRETS_MANAGER="+sqsURL, "AWS_REGION=us-east-1", PrefixEnv+"="+prefix)
}

// Leftovers lists every table on the DynamoDB endpoint and every queue on
// the SQS one: on private servers, what a run did not clean up.
func Leftovers(tb testing.TB, dynamo, sqsURL string) []string {
	tb.Helper()
	cfg := Config(tb)
	ctx := context.Background()
	var left []string
	p := dynamodb.NewListTablesPaginator(dynamodb.NewFromConfig(cfg, ForEmulator, func(o *dynamodb.Options) { o.BaseEndpoint = &dynamo }),
		&dynamodb.ListTablesInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			tb.Fatalf("list tables at %s: %v", dynamo, err)
		}
		left = append(left, page.TableNames...)
	}
	qp := sqs.NewListQueuesPaginator(sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = &sqsURL }), &sqs.ListQueuesInput{})
	for qp.HasMorePages() {
		page, err := qp.NextPage(ctx)
		if err != nil {
			tb.Fatalf("list queues at %s: %v", sqsURL, err)
		}
		left = append(left, page.QueueUrls...)
	}
	return left
}
