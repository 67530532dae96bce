# The cozyrender image: `cozyrender webhook` by default (the chart's
# Deployment passes its flags). Build the wheel first (`make dist`), then:
#   docker build -t cozyrender:0.2.0 .
FROM python:3.11-slim

RUN useradd --system --uid 65532 --no-create-home --shell /usr/sbin/nologin cozyrender
COPY dist/*.whl /tmp/wheels/
RUN pip install --no-cache-dir /tmp/wheels/*.whl && rm -rf /tmp/wheels

USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["cozyrender", "webhook"]
