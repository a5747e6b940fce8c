#!/bin/bash
set -e
export GIT_AUTHOR_NAME=dev GIT_AUTHOR_EMAIL=dev@example.com GIT_COMMITTER_NAME=dev GIT_COMMITTER_EMAIL=dev@example.com
git init -q -b main .
n=0
for msg in "Initial import" "Add parser" "Release candidate" "Fix typo in docs" "Start next cycle"; do
  n=$((n + 1))
  export GIT_AUTHOR_DATE="2026-01-0${n}T12:00:00Z" GIT_COMMITTER_DATE="2026-01-0${n}T12:00:00Z"
  echo "$msg" >> CHANGES.txt
  git add CHANGES.txt
  git commit -q -m "$msg"
done
