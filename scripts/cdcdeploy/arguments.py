"""The AWS commands' common arguments, declared once: deploy, destroy, doctor and replay name
the stack, the region, the profile and their wait bounds alike, with the same help and the same errors."""

from __future__ import annotations

import argparse
import math
import os

import boto3
from cdctools import cli

STACK_NAME = "cdc-lake"
STACK_HELP = "the pipeline stack's name"


def minutes(text: str) -> float:
    """A wait bound: a positive number of minutes (argparse prefixes the flag to the error)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of minutes") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of minutes above 0")
    return value


def parser(prog: str, doc: str, *, stack_positional: bool = False) -> cli.Parser:
    """A command's parser with the stack (an option, or the first positional), --region and --profile."""
    p = cli.Parser(prog=prog, description=doc.split("\n")[0])
    if stack_positional:
        p.add_argument("stack_name", metavar="stack", help=f"{STACK_HELP} (deploy --stack-name)")
    else:
        p.add_argument("--stack-name", default=STACK_NAME, metavar="NAME", help=f"{STACK_HELP} (default {STACK_NAME})")
    p.add_argument(
        "--region",
        default=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"),
        help="AWS region (default $AWS_REGION / $AWS_DEFAULT_REGION)",
    )
    p.add_argument("--profile", help="AWS CLI profile")
    return p


def add_wait(p: argparse.ArgumentParser, flag: str, default: float, what: str) -> None:
    """A wait bound in minutes, e.g. --wait-minutes."""
    p.add_argument(flag, type=minutes, default=default, metavar="MINUTES", help=f"{what} (default {default:g})")


def parse(p: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """The arguments, with a region from the flag or the environment (boto3 would only fail later)."""
    args = p.parse_args(argv)
    if not args.region:
        p.error("--region (or AWS_REGION) is required")
    return args


def session(args: argparse.Namespace) -> boto3.Session:
    return boto3.Session(profile_name=args.profile, region_name=args.region)
