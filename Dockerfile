FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY pyproject.toml ./
COPY portal portal
COPY provisioning provisioning
RUN pip install --no-cache-dir . && useradd --create-home trainyard
COPY . .
RUN TRAINYARD_ENV=development python manage.py collectstatic --noinput -v0 && mkdir -p var/metrics && chown -R trainyard var
USER trainyard
EXPOSE 8000
CMD ["gunicorn", "portal.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3", "--access-logfile", "-"]
