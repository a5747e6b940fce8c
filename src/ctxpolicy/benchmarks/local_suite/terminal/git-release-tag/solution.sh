#!/bin/bash
commit=$(git log --format='%H %s' | sed -n 's/ Release candidate$//p')
git tag v1.0 "$commit"
echo "$commit" > release_commit.txt
