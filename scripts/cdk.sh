#!/usr/bin/env bash
# Runs the pinned AWS CDK CLI (.tools/cdk, installed on first use by
# scripts/install-cdk.sh) from the repository root, where cdk.json runs the
# Go app (`go run -C infra ./app`). All arguments go to `cdk`:
#
#   scripts/cdk.sh synth                           offline, no AWS account needed
#   scripts/cdk.sh synth -c config=path/to/connections.json -c maxConcurrency=20
#   scripts/cdk.sh deploy                          uses your AWS credentials
#
# synth, ls/list, docs, doctor, acknowledge, notices and context run with every
# AWS credential and profile hidden (an empty environment, no shared files, no
# instance metadata): the stack is environment-agnostic, and even dummy
# credentials make the CLI call STS. Other commands see your environment.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$SCRIPT_DIR/.." && pwd -P)
cd "$ROOT"

"$SCRIPT_DIR/install-cdk.sh" >/dev/null

export CDK_DISABLE_VERSION_CHECK=1
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20
export CDK_DISABLE_CLI_TELEMETRY=1

# The CDK command is the first argument that is neither an option nor the
# value of one (cdk's global options that take a value).
command=""
skip=0
for arg in "$@"; do
	if ((skip)); then
		skip=0
		continue
	fi
	case $arg in
	-c | --context | -a | --app | -o | --output | --profile | -r | --role-arn | --plugin | -p | \
		--parameters | --ca-bundle-path | --proxy | --build | --toolkit-stack-name | --unstable)
		skip=1
		;;
	-*) ;;
	*)
		command=$arg
		break
		;;
	esac
done

case $command in
synth | synthesize | ls | list | docs | doc | doctor | acknowledge | ack | notices | context | "")
	unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_SECURITY_TOKEN \
		AWS_PROFILE AWS_DEFAULT_PROFILE AWS_ROLE_ARN AWS_WEB_IDENTITY_TOKEN_FILE \
		AWS_CONTAINER_CREDENTIALS_RELATIVE_URI AWS_CONTAINER_CREDENTIALS_FULL_URI \
		AWS_CONTAINER_AUTHORIZATION_TOKEN
	export AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_CONFIG_FILE=/dev/null
	export AWS_EC2_METADATA_DISABLED=true
	;;
esac

exec npx --no --prefix "$ROOT/.tools/cdk" cdk "$@"
