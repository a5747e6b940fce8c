#!/bin/bash
name=$(sed -n 's/^NAME=//p' defaults.env)
workers=$(grep -c . hosts.txt)
sed -e "s/{{NAME}}/$name/g" -e "s/{{PORT}}/8421/g" -e "s/{{WORKERS}}/$workers/g" template.conf > service.conf
